// Package agent is the pifleet agent daemon as a library: what
// `pifleet-agent serve` runs on every worker machine. It listens for one
// pinned server, provisions bundles, supervises pi workers (`pi --mode
// rpc`) under shims that outlive it, and keeps the reports of finished
// tasks until the server acknowledges them.
//
//	a, err := agent.New(agent.Config{Pin: pin, ServerKeys: keys, Whois: whois, StateDir: dir, ShimCommand: …})
//	go a.Run(ctx)          // re-adopt, listen, serve
//	<-a.Ready()            // a.Addr() is bound
//	a.Close()              // detach: workers keep running
//
// # Control plane
//
// The listener binds the machine's tailscale IPv4 on port 9788 (Config.IPProvider,
// polled every RebindInterval; a new address is bound and the old one
// closed without touching connections or workers) — never every interface
// unless Config.Listen says so. Each connection is gated before a single
// byte is written: whois, then only the pinned server gets through (deny
// by default). The pinned server then receives hello (machine,
// role agent, the module version from the build information, the Node
// platform name, capabilities, the models pi reported when known), every
// unacknowledged task_done in seq order, and a sessions_report of every
// session (paged when it does not fit one frame), and its frames are
// dispatched as the v1 protocol says, with pifleet's additions
// (docs/protocol.md).
//
// With Config.Dial the agent also keeps a connection to a server's
// inbound address, for a server that cannot reach the machine: the same
// gate (only the pinned server gets a byte) and the same hello, then the
// server's hello once its trust check admitted the agent, and from there
// the same service. A connection that is down is dialled again after 1 s,
// 2 s, 4 s … 30 s (transport.Redialer).
//
// # Spawning
//
// A spawn is validated before anything starts — cwd an existing
// directory, capacity (max_workers "N/M"), bundle name, fromSession — then
// the bundle is synced from the registry (spawn.env.PI_FLEET_SERVER, else
// Config.Registry) into the cache, its platforms and pinned hash checked,
// and the model resolved (spawn > bundle primary and fallbacks > machine
// default) against the models pi reports with the bundle's extensions
// loaded (a short probe, cached per bundle version). Every refusal is a
// spawn_error with a named code, sent before a worker process exists.
// pi is then started with the bundle's resources as flags (-e, --skill,
// --prompt-template, --tools, --provider/--model/--thinking) and a
// --session-dir under the sessions root, and spawned is sent once the
// worker answered its first get_state. spawn_progress frames report the
// steps to a pifleet server.
//
// # Tasks and the outbox
//
// An rpc with a taskId opens a task, recorded in the instance registry
// before the command reaches the worker. The worker's settle (the end of
// its turn; the agent emits agent_settled for pi 0.73.1) or its exit
// ends it: the task_done is committed to the bbolt outbox before any send,
// sent to the submitting connection (else to all), re-sent with backoff
// while unacknowledged, replayed on every new connection, and removed only
// by task_done_ack. task_accept (stop | keep_idle, deliver none) and
// task_reject (the feedback is the next prompt of the same session, same
// taskId) drive the review cycle.
//
// # Restarts
//
// Workers run under shims (internal/shim), so a restarted agent re-adopts
// them with the same instance ids and resumes their event streams where
// the previous agent stopped; a run in flight settles exactly once. A
// worker that cannot be re-adopted is reported lost with its session path
// and an aborted task_done for its open task. No pid is ever signalled.
// A task is recorded before its command reaches the worker and closed in
// the same transaction that stores its task_done, so a kill -9 at any
// moment neither loses nor repeats one: a worker re-adopted with a task
// still open is adopted with its run open, and the worker layer settles
// that run exactly once (at its end, or at once when pi is found idle).
package agent
