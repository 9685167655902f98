// Package controlapi is the local control API of pifleet-server: HTTP and
// JSON over a unix socket (default) or loopback TCP, served by Server over
// a Backend, and spoken by the typed Client that the pifleet-server
// commands (status, spawn, prompt, …) use. Other programs may speak it
// too; docs/control-api.md is the reference with examples.
//
// # Addresses and security
//
// The default address is the unix socket control.sock in the server's
// state directory (DefaultAddr), created mode 0600 in a directory created
// 0700: the file's permissions are the guard, and no token is used. TCP
// (ParseAddr "127.0.0.1:9789") is for clients that cannot reach a unix
// socket; Listen refuses an address outside loopback unless
// ListenOptions.AllowRemote is set, and pifleet-server always requires a
// bearer token in TCP mode (LoadOrCreateToken writes control.token, mode
// 0600, beside the socket), because a loopback port is open to every user
// of the machine.
//
// # The web page
//
// A WebAuth (NewWebAuth) turns one-time logins (WebLogin, minted by POST
// /v1/web/logins) or the pasted token into browser sessions: an HttpOnly,
// SameSite=Strict cookie. A Server given WithWebAuth takes such a session
// in place of the bearer token, refuses it from another site, and asks
// every request that changes something for the session's CSRF token in
// the X-CSRF-Token header. Package webui is the page.
//
// # Endpoints (all under /v1)
//
//	GET  /v1/status                    Status
//	POST /v1/instances                 spawn: SpawnRequest → SpawnResult, or an NDJSON stream of SpawnLine
//	POST /v1/instances/{id}/prompt     PromptRequest → PromptResult
//	POST /v1/instances/{id}/steer      TextRequest → 204
//	POST /v1/instances/{id}/abort      → 204
//	POST /v1/instances/{id}/stop       → 204 once stopped
//	GET  /v1/instances/{id}/output     Output
//	GET  /v1/instances/{id}/transcript?limit=N  Transcript
//	POST /v1/instances/{id}/rebundle   RebundleRequest → RebundleResult
//	PUT  /v1/instances/{id}/tools      ToolsRequest → ToolsRequest (the tools now active)
//	PUT  /v1/instances/{id}/model      ModelRef → 204
//	GET  /v1/tasks                     []Task
//	POST /v1/tasks/{id}/accept         AcceptRequest → 204
//	POST /v1/tasks/{id}/reject         RejectRequest → RejectResult
//	GET  /v1/trust                     []TrustDecision
//	PUT  /v1/trust/{machine}           TrustSetRequest → TrustDecision
//	POST /v1/ui/{request}              UIAnswerRequest → 204
//	GET  /v1/watch                     server-sent events, one Change per event
//	GET  /v1/doctor                    DoctorReport
//	GET  /v1/sessions?machine=&kind=   []Session, baselines' stale flags checked first
//	GET  /v1/sessions/search?q=&machine=&cwd=  SearchResult
//	POST /v1/sessions/resume           ResumeRequest → as spawn
//	POST /v1/baselines                 BaselineRequest → Baseline
//	GET  /v1/tools                     []ToolInfo (WithTools: the tool catalogue of an orchestrating LLM)
//	POST /v1/tools/{name}              arguments → an NDJSON stream of ToolLine
//	GET  /v1/wakes?pending=            server-sent events, one Wake per durable task_done or escalation
//	POST /v1/web/logins                → WebLogin (a one-time login for the web page)
//
// A spawn (and a resume) answers with plain JSON when it ends before the
// agent reported any progress; otherwise the answer is
// application/x-ndjson: SpawnLine progress lines, then one line with the
// result or the error.
//
// The watch stream opens with the comment ": watching" once subscribed,
// then sends each change as "id: SEQ", "event: KIND", "data: JSON". Seq
// counts the changes of that stream from 1; a Change of kind dropped says
// how many the server lost because the reader was slow. With ?deltas=1
// (what Client.Watch asks for) a streamed message_update that changes the
// same worker's event before it comes as that change ("delta") instead of
// whole, so an answer of n characters costs the watcher O(n) bytes, not
// O(n²); Stream.Next rebuilds the whole event.
//
// # Errors
//
// Every refusal is a JSON body {"code","message"[,"detail"]} with the
// status of its Code (Code.HTTPStatus): unknown_instance 404,
// unknown_session 404, policy_refused 403, invalid_state 409,
// session_pinned 409, session_busy 409, spawn_error 422 (detail: the
// agent's code, e.g. platform_mismatch), not_connected 503, and so on. The
// Client returns it as *Error, which errors.Is matches against the
// sentinels (ErrUnknownInstance, ErrSpawn, …); when nothing answers it
// returns a *NotRunningError whose text tells the user to start
// pifleet-server serve.
package controlapi
