package controlapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// MaxBodyBytes bounds a request body.
const MaxBodyBytes = 1 << 20

// Content types of the streaming answers.
const (
	// ContentTypeNDJSON is the spawn answer once provisioning progress
	// started: one SpawnLine per line.
	ContentTypeNDJSON = "application/x-ndjson"
	// ContentTypeSSE is the watch stream.
	ContentTypeSSE = "text/event-stream"
)

// SpawnLine is one line of a streamed spawn answer: exactly one field is
// set. The last line holds Result or Error.
type SpawnLine struct {
	Progress *SpawnProgress `json:"progress,omitempty"`
	Result   *SpawnResult   `json:"result,omitempty"`
	Error    *Error         `json:"error,omitempty"`
}

// Server is the HTTP side of the control API: an http.Handler over a
// Backend.
type Server struct {
	b         Backend
	token     string
	web       *WebAuth
	log       zerolog.Logger
	mux       *http.ServeMux
	catalogue Tools
}

// ServerOption configures a Server.
type ServerOption func(*Server)

// WithToken makes every request present "Authorization: Bearer token"
// (TCP mode).
func WithToken(token string) ServerOption { return func(s *Server) { s.token = token } }

// WithWebAuth also accepts the browser sessions of a (a session cookie,
// with the CSRF token on every change) and serves POST /v1/web/logins,
// which mints one-time logins for a's page. A browser session may do what
// the bearer token may, except minting logins.
func WithWebAuth(a *WebAuth) ServerOption { return func(s *Server) { s.web = a } }

// WithLogger logs each failed request and stream (default zerolog.Nop()).
func WithLogger(l zerolog.Logger) ServerOption { return func(s *Server) { s.log = l } }

// NewServer returns the handler serving b.
func NewServer(b Backend, opts ...ServerOption) *Server {
	s := &Server{b: b, log: zerolog.Nop(), mux: http.NewServeMux()}
	for _, o := range opts {
		o(s)
	}
	p := "/" + APIVersion
	s.mux.HandleFunc("GET "+p+"/status", s.status)
	s.mux.HandleFunc("POST "+p+"/instances", s.spawn)
	s.mux.HandleFunc("POST "+p+"/instances/{id}/prompt", s.prompt)
	s.mux.HandleFunc("POST "+p+"/instances/{id}/steer", s.steer)
	s.mux.HandleFunc("POST "+p+"/instances/{id}/abort", s.abort)
	s.mux.HandleFunc("POST "+p+"/instances/{id}/stop", s.stop)
	s.mux.HandleFunc("GET "+p+"/instances/{id}/output", s.output)
	s.mux.HandleFunc("GET "+p+"/instances/{id}/transcript", s.transcript)
	s.mux.HandleFunc("GET "+p+"/instances/{id}/diff", s.diff)
	s.mux.HandleFunc("GET "+p+"/instances/{id}/read", s.readFile)
	s.mux.HandleFunc("GET "+p+"/instances/{id}/list", s.listDir)
	s.mux.HandleFunc("GET "+p+"/instances/{id}/grep", s.grep)
	s.mux.HandleFunc("POST "+p+"/instances/{id}/rebundle", s.rebundle)
	s.mux.HandleFunc("PUT "+p+"/instances/{id}/tools", s.tools)
	s.mux.HandleFunc("PUT "+p+"/instances/{id}/model", s.model)
	s.mux.HandleFunc("PUT "+p+"/instances/{id}/model-pin", s.modelPin)
	s.mux.HandleFunc("GET "+p+"/tasks", s.tasks)
	s.mux.HandleFunc("POST "+p+"/tasks/{id}/accept", s.accept)
	s.mux.HandleFunc("POST "+p+"/tasks/{id}/reject", s.reject)
	s.mux.HandleFunc("POST "+p+"/agents/{name}/retry", s.retry)
	s.mux.HandleFunc("GET "+p+"/trust", s.trustList)
	s.mux.HandleFunc("PUT "+p+"/trust/{machine}", s.trustSet)
	s.mux.HandleFunc("POST "+p+"/ui/{request}", s.uiAnswer)
	s.mux.HandleFunc("GET "+p+"/watch", s.watch)
	s.mux.HandleFunc("GET "+p+"/doctor", s.doctor)
	s.mux.HandleFunc("GET "+p+"/sessions", s.sessions)
	s.mux.HandleFunc("GET "+p+"/sessions/search", s.searchSessions)
	s.mux.HandleFunc("POST "+p+"/sessions/resume", s.resume)
	s.mux.HandleFunc("POST "+p+"/baselines", s.createBaseline)
	s.mux.HandleFunc("POST "+p+"/web/logins", s.webLogin)
	s.registerExec(p)
	s.registerWorktree(p)
	s.routeTools(p)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.fail(w, r, &Error{Code: CodeUnknownEndpoint, Message: r.Method + " " + r.URL.Path})
	})
	return s
}

// ServeHTTP checks the token (or the browser session), then routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	browser, err := s.authenticate(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if browser {
		r = r.WithContext(context.WithValue(r.Context(), browserKey{}, true))
	}
	s.mux.ServeHTTP(w, r)
}

// browserKey marks the context of a request authenticated by a browser
// session.
type browserKey struct{}

// authenticate admits a request: no guard configured (the unix socket's
// permissions are the guard), the bearer token, or a browser session with
// its CSRF rules. browser reports the last.
func (s *Server) authenticate(r *http.Request) (browser bool, err *Error) {
	if s.token != "" {
		if h := r.Header.Get("Authorization"); h != "" || s.web == nil {
			got, ok := strings.CutPrefix(h, "Bearer ")
			if !ok || !tokenMatches(got, s.token) {
				return false, &Error{Code: CodeUnauthorized, Message: "missing or wrong bearer token"}
			}
			return false, nil
		}
	}
	if s.web != nil {
		if csrf, ok := s.web.Session(r); ok {
			return true, checkBrowser(r, csrf)
		}
	}
	if s.token == "" {
		return false, nil // the socket's permissions are the guard
	}
	return false, &Error{Code: CodeUnauthorized, Message: "missing or wrong bearer token or session cookie (log in with pifleet-server ui)"}
}

// Serve serves h on l until ctx is done, then stops: open streams (watch)
// are ended at once and other requests get up to grace to finish. It
// returns nil after a shutdown asked through ctx.
func Serve(ctx context.Context, l net.Listener, h http.Handler, grace time.Duration) error {
	base, cancelBase := context.WithCancel(context.Background())
	defer cancelBase()
	hs := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return base },
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(l) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	// Streams never end by themselves: cancel their contexts first so
	// Shutdown does not wait for them.
	cancelBase()
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := hs.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = hs.Close()
	}
	if serr := <-errc; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}

// ---- plumbing ----

func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	e := asAPIError(err)
	if errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return // the client went away; nobody reads the answer
	}
	s.log.Debug().Str("method", r.Method).Str("path", r.URL.Path).Str("code", string(e.Code)).Msg(e.Message)
	writeJSON(w, e.Code.HTTPStatus(), e)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// decode reads a JSON body into v and, when v can validate itself, checks
// it. An empty body leaves v as is (and is checked as such).
func decode(r *http.Request, v any) error {
	body := http.MaxBytesReader(nil, r.Body, MaxBodyBytes)
	err := json.NewDecoder(body).Decode(v)
	if err == nil || errors.Is(err, io.EOF) {
		// A request that knows its own rules is checked here, once for
		// every handler that takes it.
		if c, ok := v.(interface{ validate() error }); ok {
			return c.validate()
		}
		return nil
	}
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return badRequest("body larger than %d bytes", MaxBodyBytes)
	}
	return badRequest("body: %v", err)
}

// reply runs a backend call and writes its answer (204 when v is nil).
func (s *Server) reply(w http.ResponseWriter, r *http.Request, v any, err error) {
	switch {
	case err != nil:
		s.fail(w, r, err)
	case v == nil:
		w.WriteHeader(http.StatusNoContent)
	default:
		writeJSON(w, http.StatusOK, v)
	}
}

// ---- handlers ----

func (s *Server) status(w http.ResponseWriter, r *http.Request) {
	st, err := s.b.Status(r.Context())
	s.reply(w, r, st, err)
}

func (s *Server) spawn(w http.ResponseWriter, r *http.Request) {
	var req SpawnRequest
	if err := decode(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	s.streamSpawn(w, r, func(progress func(SpawnProgress)) (SpawnResult, error) {
		return s.b.Spawn(r.Context(), req, progress)
	})
}

func (s *Server) resume(w http.ResponseWriter, r *http.Request) {
	var req ResumeRequest
	if err := decode(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	s.streamSpawn(w, r, func(progress func(SpawnProgress)) (SpawnResult, error) {
		return s.b.Resume(r.Context(), req, progress)
	})
}

// streamSpawn answers a spawn or a resume. Progress switches the answer to
// a stream; a call that fails before any progress gets a plain error
// answer with its HTTP status.
func (s *Server) streamSpawn(w http.ResponseWriter, r *http.Request, call func(progress func(SpawnProgress)) (SpawnResult, error)) {
	var (
		mu        sync.Mutex
		streaming bool
		finished  bool
	)
	enc := json.NewEncoder(w)
	flusher, _ := w.(http.Flusher)
	line := func(l SpawnLine) {
		if !streaming {
			streaming = true
			w.Header().Set("Content-Type", ContentTypeNDJSON)
			w.WriteHeader(http.StatusOK)
		}
		_ = enc.Encode(l)
		if flusher != nil {
			flusher.Flush()
		}
	}
	res, err := call(func(p SpawnProgress) {
		mu.Lock()
		defer mu.Unlock()
		if !finished {
			line(SpawnLine{Progress: &p})
		}
	})
	mu.Lock()
	defer mu.Unlock()
	finished = true
	switch {
	case !streaming:
		s.reply(w, r, res, err)
	case err != nil:
		line(SpawnLine{Error: asAPIError(err)})
	default:
		line(SpawnLine{Result: &res})
	}
}

func (s *Server) prompt(w http.ResponseWriter, r *http.Request) {
	var req PromptRequest
	if err := decode(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.Text == "" {
		s.fail(w, r, badRequest("prompt needs a text"))
		return
	}
	res, err := s.b.Prompt(r.Context(), r.PathValue("id"), req)
	s.reply(w, r, res, err)
}

func (s *Server) steer(w http.ResponseWriter, r *http.Request) {
	var req TextRequest
	if err := decode(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.Text == "" {
		s.fail(w, r, badRequest("steer needs a text"))
		return
	}
	s.reply(w, r, nil, s.b.Steer(r.Context(), r.PathValue("id"), req.Text))
}

func (s *Server) abort(w http.ResponseWriter, r *http.Request) {
	s.reply(w, r, nil, s.b.Abort(r.Context(), r.PathValue("id")))
}

func (s *Server) retry(w http.ResponseWriter, r *http.Request) {
	s.reply(w, r, nil, s.b.Retry(r.Context(), r.PathValue("name")))
}

func (s *Server) stop(w http.ResponseWriter, r *http.Request) {
	s.reply(w, r, nil, s.b.Stop(r.Context(), r.PathValue("id")))
}

func (s *Server) output(w http.ResponseWriter, r *http.Request) {
	out, err := s.b.Output(r.Context(), r.PathValue("id"))
	if out.Tail == nil {
		out.Tail = []json.RawMessage{}
	}
	s.reply(w, r, out, err)
}

func (s *Server) transcript(w http.ResponseWriter, r *http.Request) {
	limit := DefaultTranscriptLimit
	if q := r.URL.Query().Get("limit"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 1 || n > MaxTranscriptLimit {
			s.fail(w, r, badRequest("limit %q is not a number from 1 to %d", q, MaxTranscriptLimit))
			return
		}
		limit = n
	}
	t, err := s.b.Transcript(r.Context(), r.PathValue("id"), limit)
	if t.Entries == nil {
		t.Entries = []json.RawMessage{}
	}
	s.reply(w, r, t, err)
}

func (s *Server) diff(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	staged, err := boolParam(q, "staged")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	stat, err := boolParam(q, "stat")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	base, err := boolParam(q, "base")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := s.b.Diff(r.Context(), r.PathValue("id"), DiffQuery{Ref: q.Get("ref"), Staged: staged, Stat: stat, Base: base})
	s.reply(w, r, res, err)
}

func (s *Server) readFile(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("path") == "" {
		s.fail(w, r, badRequest("read needs a path"))
		return
	}
	offset, err := countParam(q, "offset")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	limit, err := countParam(q, "limit")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := s.b.ReadFile(r.Context(), r.PathValue("id"), ReadQuery{Path: q.Get("path"), Offset: offset, Limit: limit})
	s.reply(w, r, res, err)
}

func (s *Server) listDir(w http.ResponseWriter, r *http.Request) {
	res, err := s.b.ListDir(r.Context(), r.PathValue("id"), r.URL.Query().Get("path"))
	if err == nil && res.Entries == nil {
		res.Entries = []FileEntry{}
	}
	s.reply(w, r, res, err)
}

func (s *Server) grep(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("pattern") == "" {
		s.fail(w, r, badRequest("grep needs a pattern"))
		return
	}
	res, err := s.b.Grep(r.Context(), r.PathValue("id"), GrepQuery{Pattern: q.Get("pattern"), Glob: q.Get("glob")})
	s.reply(w, r, res, err)
}

// boolParam reads a query parameter that is true, false, 1, 0 or absent.
func boolParam(q url.Values, name string) (bool, error) {
	v := q.Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, badRequest("%s=%q is not true or false", name, v)
	}
	return b, nil
}

// countParam reads a query parameter that is a non-negative integer (0
// when absent).
func countParam(q url.Values, name string) (int, error) {
	v := q.Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, badRequest("%s=%q is not a non-negative integer", name, v)
	}
	return n, nil
}

func (s *Server) rebundle(w http.ResponseWriter, r *http.Request) {
	var req RebundleRequest
	if err := decode(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.Bundle == "" {
		s.fail(w, r, badRequest("rebundle needs a bundle"))
		return
	}
	res, err := s.b.Rebundle(r.Context(), r.PathValue("id"), req.Bundle)
	s.reply(w, r, res, err)
}

func (s *Server) tools(w http.ResponseWriter, r *http.Request) {
	var req ToolsRequest
	if err := decode(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.Tools == nil {
		req.Tools = []string{}
	}
	active, err := s.b.SetTools(r.Context(), r.PathValue("id"), req.Tools)
	if active == nil {
		active = []string{}
	}
	s.reply(w, r, ToolsRequest{Tools: active}, err)
}

func (s *Server) model(w http.ResponseWriter, r *http.Request) {
	var req ModelRef
	if err := decode(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if req.Provider == "" || req.ID == "" {
		s.fail(w, r, badRequest("model needs a provider and an id"))
		return
	}
	s.reply(w, r, nil, s.b.SetModel(r.Context(), r.PathValue("id"), req))
}

func (s *Server) modelPin(w http.ResponseWriter, r *http.Request) {
	var req ModelPinRequest
	if err := decode(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := s.b.PinModel(r.Context(), r.PathValue("id"), req.Pin)
	s.reply(w, r, res, err)
}

func (s *Server) tasks(w http.ResponseWriter, r *http.Request) {
	ts, err := s.b.Tasks(r.Context())
	if ts == nil {
		ts = []Task{}
	}
	s.reply(w, r, ts, err)
}

func (s *Server) accept(w http.ResponseWriter, r *http.Request) {
	var req AcceptRequest
	if err := decode(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	switch req.Disposition {
	case "":
		req.Disposition = DispositionKeepIdle
	case DispositionStop, DispositionKeepIdle:
	default:
		s.fail(w, r, badRequest("disposition %q is not stop or keep_idle", req.Disposition))
		return
	}
	if req.Deliver != "" && req.Deliver != "none" {
		d := DeliverRequest{Mode: req.Deliver, Target: req.Target, Message: req.Message}
		if err := d.validate(); err != nil {
			s.fail(w, r, err)
			return
		}
		// Delivered first: a delivery that fails leaves the task under
		// review, not accepted.
		if _, err := s.b.Deliver(r.Context(), r.PathValue("id"), d); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	s.reply(w, r, nil, s.b.Accept(r.Context(), r.PathValue("id"), req.Disposition))
}

func (s *Server) reject(w http.ResponseWriter, r *http.Request) {
	var req RejectRequest
	if err := decode(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if strings.TrimSpace(req.Feedback) == "" {
		s.fail(w, r, badRequest("reject needs feedback"))
		return
	}
	res, err := s.b.Reject(r.Context(), r.PathValue("id"), req.Feedback)
	s.reply(w, r, res, err)
}

func (s *Server) trustList(w http.ResponseWriter, r *http.Request) {
	ds, err := s.b.TrustList(r.Context())
	if ds == nil {
		ds = []TrustDecision{}
	}
	s.reply(w, r, ds, err)
}

func (s *Server) trustSet(w http.ResponseWriter, r *http.Request) {
	var req TrustSetRequest
	if err := decode(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if !req.Policy.Valid() {
		s.fail(w, r, badRequest("policy %q is not allow, steer or deny", req.Policy))
		return
	}
	d, err := s.b.TrustSet(r.Context(), r.PathValue("machine"), req.Policy)
	s.reply(w, r, d, err)
}

func (s *Server) uiAnswer(w http.ResponseWriter, r *http.Request) {
	var req UIAnswerRequest
	if err := decode(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := checkUIValue(req.Value); err != nil {
		s.fail(w, r, err)
		return
	}
	if len(req.Value) == 0 {
		req.Value = json.RawMessage("null")
	}
	s.reply(w, r, nil, s.b.UIAnswer(r.Context(), r.PathValue("request"), req.Value))
}

// checkUIValue accepts what a worker dialog can take: a string, a boolean,
// or null.
func checkUIValue(v json.RawMessage) error {
	if len(v) == 0 {
		return nil
	}
	var x any
	if err := json.Unmarshal(v, &x); err != nil {
		return badRequest("value: %v", err)
	}
	switch x.(type) {
	case nil, string, bool:
		return nil
	}
	return badRequest("value must be a string, a boolean or null, not %s", v)
}

func (s *Server) doctor(w http.ResponseWriter, r *http.Request) {
	rep, err := s.b.Doctor(r.Context())
	if rep.Checks == nil {
		rep.Checks = []Check{}
	}
	s.reply(w, r, rep, err)
}

func (s *Server) sessions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := SessionFilter{Machine: q.Get("machine"), Kind: SessionKind(q.Get("kind"))}
	if !f.Kind.Valid() {
		s.fail(w, r, badRequest("kind %q is not baseline, task or scratch", f.Kind))
		return
	}
	ss, err := s.b.Sessions(r.Context(), f)
	if ss == nil {
		ss = []Session{}
	}
	s.reply(w, r, ss, err)
}

func (s *Server) searchSessions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	search := SessionSearch{Query: q.Get("q"), Machine: q.Get("machine"), Cwd: q.Get("cwd")}
	if strings.TrimSpace(search.Query) == "" {
		s.fail(w, r, badRequest("session search needs a query (q)"))
		return
	}
	res, err := s.b.SearchSessions(r.Context(), search)
	if res.Hits == nil {
		res.Hits = []SessionHit{}
	}
	s.reply(w, r, res, err)
}

func (s *Server) createBaseline(w http.ResponseWriter, r *http.Request) {
	var req BaselineRequest
	if err := decode(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	b, err := s.b.CreateBaseline(r.Context(), req)
	s.reply(w, r, b, err)
}

func (s *Server) webLogin(w http.ResponseWriter, r *http.Request) {
	switch {
	case s.web == nil:
		s.fail(w, r, &Error{Code: CodeNotSupported, Message: "this server serves no web page (start serve with --ui ADDR)"})
	case r.Context().Value(browserKey{}) != nil:
		s.fail(w, r, &Error{Code: CodeUnauthorized, Message: "a browser session cannot mint logins; run pifleet-server ui"})
	default:
		writeJSON(w, http.StatusOK, s.web.NewLogin())
	}
}

// watch streams changes as server-sent events: "id: SEQ", "event: KIND",
// "data: CHANGE-JSON" per change; with ?deltas=1, streamed updates as
// deltas (watchdelta.go).
func (s *Server) watch(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		s.fail(w, r, &Error{Code: CodeInternal, Message: "streaming not supported by this connection"})
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	changes, err := s.b.Watch(ctx)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", ContentTypeSSE)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	// An opening comment tells the client the subscription is live.
	if _, err := io.WriteString(w, ": watching\n\n"); err != nil {
		return
	}
	flusher.Flush()
	var coder *deltaCoder
	if r.URL.Query().Get(WatchDeltasParam) == "1" {
		coder = &deltaCoder{last: map[string]WorkerEvent{}}
	}
	var seq uint64
	write := func(c Change) bool {
		seq++
		c.Seq = seq
		if err := writeEvent(w, coder.code(c)); err != nil {
			s.log.Debug().Err(err).Msg("watch stream ended")
			return false
		}
		return true
	}
	for {
		select {
		case <-ctx.Done():
			return
		case c, ok := <-changes:
			if !ok || !write(c) {
				return
			}
			// Flush once the backend has nothing more ready: a burst goes
			// out in few writes, a lone change at once.
		burst:
			for {
				select {
				case c, ok := <-changes:
					if !ok || !write(c) {
						flusher.Flush()
						return
					}
				default:
					break burst
				}
			}
			flusher.Flush()
		}
	}
}

func writeEvent(w io.Writer, c wireChange) error {
	data, err := json.Marshal(c)
	if err != nil {
		return err
	}
	event := string(c.Kind)
	if event == "" || strings.ContainsAny(event, "\r\n") {
		event = "change" // a line break would forge fields of the stream
	}
	_, err = fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", c.Seq, event, data)
	return err
}
