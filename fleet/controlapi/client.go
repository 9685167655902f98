package controlapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Client is the typed Go client of the control API. Its methods return
// *Error for the server's refusals (errors.Is with the sentinels) and a
// *NotRunningError when nothing answers at the address.
type Client struct {
	addr  Addr
	base  string
	hc    *http.Client
	token string
	// wholeWatch opens the watch as a client that does not ask for
	// deltas (the tests' and benchmarks' old-style watcher).
	wholeWatch bool
}

// ClientOption configures a Client.
type ClientOption func(*Client)

// WithBearer sends "Authorization: Bearer token" (TCP mode).
func WithBearer(token string) ClientOption { return func(c *Client) { c.token = token } }

// NewClient returns a client of the API at addr (see ParseAddr). It does
// not connect: the first call does.
func NewClient(addr Addr, opts ...ClientOption) (*Client, error) {
	c := &Client{addr: addr}
	tr := &http.Transport{DisableCompression: true, MaxIdleConns: 4}
	switch addr.Network {
	case "unix":
		path := addr.Address
		var d net.Dialer
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", path)
		}
		c.base = "http://pifleet-server"
	case "tcp":
		c.base = "http://" + addr.Address
	default:
		return nil, &AddrError{Addr: addr.String(), Reason: "unknown network " + addr.Network}
	}
	// No client timeout: prompt --wait and watch last as long as they
	// must; callers bound them with contexts.
	c.hc = &http.Client{Transport: tr}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// Addr is the address the client talks to.
func (c *Client) Addr() Addr { return c.addr }

// Close releases idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// do sends a request and returns the response of a 2xx answer; other
// answers become *Error.
func (c *Client) do(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+"/"+APIVersion+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if isDialError(err) {
			return nil, &NotRunningError{Addr: c.addr.String(), Err: err}
		}
		return nil, fmt.Errorf("controlapi: %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, readError(resp)
	}
	return resp, nil
}

func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// readError decodes an error answer; a body that is not one of ours (a
// proxy, another program on the port) is reported as such.
func readError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, MaxBodyBytes))
	var e Error
	if err := json.Unmarshal(b, &e); err != nil || e.Code == "" {
		return &Error{Code: CodeInternal, Message: fmt.Sprintf("unexpected answer %s: %.200q (is this a pifleet-server?)", resp.Status, b)}
	}
	return &e
}

// call sends a request and decodes a JSON answer into out (nil: none).
func (c *Client) call(ctx context.Context, method, path string, body, out any) error {
	resp, err := c.do(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("controlapi: %s %s: decode answer: %w", method, path, err)
	}
	return nil
}

func seg(s string) string { return url.PathEscape(s) }

// Status returns the fleet's snapshot.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var st Status
	err := c.call(ctx, http.MethodGet, "/status", nil, &st)
	return st, err
}

// Spawn starts a worker; progress (may be nil) receives the provisioning
// steps as they stream in.
func (c *Client) Spawn(ctx context.Context, req SpawnRequest, progress func(SpawnProgress)) (SpawnResult, error) {
	return c.spawnLike(ctx, "/instances", req, progress)
}

// Resume starts a worker on a session of the registry; progress (may be
// nil) is as for Spawn.
func (c *Client) Resume(ctx context.Context, req ResumeRequest, progress func(SpawnProgress)) (SpawnResult, error) {
	return c.spawnLike(ctx, "/sessions/resume", req, progress)
}

// spawnLike posts a spawn or a resume and reads its plain or streamed
// answer.
func (c *Client) spawnLike(ctx context.Context, path string, req any, progress func(SpawnProgress)) (SpawnResult, error) {
	resp, err := c.do(ctx, http.MethodPost, path, req)
	if err != nil {
		return SpawnResult{}, err
	}
	defer resp.Body.Close()
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt != ContentTypeNDJSON {
		var res SpawnResult
		if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
			return SpawnResult{}, fmt.Errorf("controlapi: POST %s: decode answer: %w", path, err)
		}
		return res, nil
	}
	return readSpawnStream(resp.Body, progress)
}

// readSpawnStream reads SpawnLines up to the result or error.
func readSpawnStream(r io.Reader, progress func(SpawnProgress)) (SpawnResult, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), MaxBodyBytes)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var l SpawnLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return SpawnResult{}, fmt.Errorf("controlapi: spawn stream: %w", err)
		}
		switch {
		case l.Error != nil:
			return SpawnResult{}, l.Error
		case l.Result != nil:
			return *l.Result, nil
		case l.Progress != nil && progress != nil:
			progress(*l.Progress)
		}
	}
	if err := sc.Err(); err != nil {
		return SpawnResult{}, fmt.Errorf("controlapi: spawn stream: %w", err)
	}
	return SpawnResult{}, errors.New("controlapi: spawn stream ended without a result (server stopped?)")
}

// Prompt sends text to an instance (see PromptRequest).
func (c *Client) Prompt(ctx context.Context, instanceID string, req PromptRequest) (PromptResult, error) {
	var res PromptResult
	err := c.call(ctx, http.MethodPost, "/instances/"+seg(instanceID)+"/prompt", req, &res)
	return res, err
}

// Steer queues a message after the worker's current turn.
func (c *Client) Steer(ctx context.Context, instanceID, text string) error {
	return c.call(ctx, http.MethodPost, "/instances/"+seg(instanceID)+"/steer", TextRequest{Text: text}, nil)
}

// Abort interrupts the instance's run.
func (c *Client) Abort(ctx context.Context, instanceID string) error {
	return c.call(ctx, http.MethodPost, "/instances/"+seg(instanceID)+"/abort", nil, nil)
}

// Retry dials an agent now.
func (c *Client) Retry(ctx context.Context, agent string) error {
	return c.call(ctx, http.MethodPost, "/agents/"+seg(agent)+"/retry", nil, nil)
}

// Stop ends the instance's worker.
func (c *Client) Stop(ctx context.Context, instanceID string) error {
	return c.call(ctx, http.MethodPost, "/instances/"+seg(instanceID)+"/stop", nil, nil)
}

// Output returns the instance's tail and snapshot.
func (c *Client) Output(ctx context.Context, instanceID string) (Output, error) {
	var out Output
	err := c.call(ctx, http.MethodGet, "/instances/"+seg(instanceID)+"/output", nil, &out)
	return out, err
}

// Diff runs git diff in an instance's cwd.
func (c *Client) Diff(ctx context.Context, instanceID string, q DiffQuery) (FileResult, error) {
	v := url.Values{}
	if q.Ref != "" {
		v.Set("ref", q.Ref)
	}
	if q.Staged {
		v.Set("staged", "true")
	}
	if q.Stat {
		v.Set("stat", "true")
	}
	if q.Base {
		v.Set("base", "true")
	}
	return c.file(ctx, instanceID, "diff", v)
}

// ReadFile reads a file of an instance's cwd.
func (c *Client) ReadFile(ctx context.Context, instanceID string, q ReadQuery) (FileResult, error) {
	v := url.Values{"path": {q.Path}}
	if q.Offset > 0 {
		v.Set("offset", strconv.Itoa(q.Offset))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return c.file(ctx, instanceID, "read", v)
}

// ListDir lists a directory of an instance's cwd ("" for the cwd).
func (c *Client) ListDir(ctx context.Context, instanceID, path string) (FileResult, error) {
	v := url.Values{}
	if path != "" {
		v.Set("path", path)
	}
	return c.file(ctx, instanceID, "list", v)
}

// Grep searches an instance's cwd for a pattern in files matching glob.
func (c *Client) Grep(ctx context.Context, instanceID string, q GrepQuery) (FileResult, error) {
	v := url.Values{"pattern": {q.Pattern}}
	if q.Glob != "" {
		v.Set("glob", q.Glob)
	}
	return c.file(ctx, instanceID, "grep", v)
}

func (c *Client) file(ctx context.Context, instanceID, op string, q url.Values) (FileResult, error) {
	var res FileResult
	err := c.call(ctx, http.MethodGet, withQuery("/instances/"+seg(instanceID)+"/"+op, q), nil, &res)
	return res, err
}

// Rebundle switches an instance to another bundle.
func (c *Client) Rebundle(ctx context.Context, instanceID, bundle string) (RebundleResult, error) {
	var res RebundleResult
	err := c.call(ctx, http.MethodPost, "/instances/"+seg(instanceID)+"/rebundle", RebundleRequest{Bundle: bundle}, &res)
	return res, err
}

// SetTools sets the active tools and returns those now active.
func (c *Client) SetTools(ctx context.Context, instanceID string, tools []string) ([]string, error) {
	var res ToolsRequest
	err := c.call(ctx, http.MethodPut, "/instances/"+seg(instanceID)+"/tools", ToolsRequest{Tools: tools}, &res)
	return res.Tools, err
}

// SetModel switches the worker's model.
func (c *Client) SetModel(ctx context.Context, instanceID string, m ModelRef) error {
	return c.call(ctx, http.MethodPut, "/instances/"+seg(instanceID)+"/model", m, nil)
}

// PinModel pins (pin true) or unpins the worker's model.
func (c *Client) PinModel(ctx context.Context, instanceID string, pin bool) (ModelPin, error) {
	var res ModelPin
	err := c.call(ctx, http.MethodPut, "/instances/"+seg(instanceID)+"/model-pin", ModelPinRequest{Pin: pin}, &res)
	return res, err
}

// Tasks lists the tracked tasks.
func (c *Client) Tasks(ctx context.Context) ([]Task, error) {
	var ts []Task
	err := c.call(ctx, http.MethodGet, "/tasks", nil, &ts)
	return ts, err
}

// Accept accepts a task.
func (c *Client) Accept(ctx context.Context, taskID string, d Disposition) error {
	return c.call(ctx, http.MethodPost, "/tasks/"+seg(taskID)+"/accept", AcceptRequest{Disposition: d}, nil)
}

// AcceptWith accepts a task as Accept does, delivering its work first
// (req.Disposition defaults to keep_idle).
func (c *Client) AcceptWith(ctx context.Context, taskID string, req AcceptRequest) error {
	return c.call(ctx, http.MethodPost, "/tasks/"+seg(taskID)+"/accept", req, nil)
}

// Reject rejects a task with feedback.
func (c *Client) Reject(ctx context.Context, taskID, feedback string) (RejectResult, error) {
	var res RejectResult
	err := c.call(ctx, http.MethodPost, "/tasks/"+seg(taskID)+"/reject", RejectRequest{Feedback: feedback}, &res)
	return res, err
}

// TrustList lists the trust decisions.
func (c *Client) TrustList(ctx context.Context) ([]TrustDecision, error) {
	var ds []TrustDecision
	err := c.call(ctx, http.MethodGet, "/trust", nil, &ds)
	return ds, err
}

// TrustSet records a trust decision.
func (c *Client) TrustSet(ctx context.Context, machine string, p Policy) (TrustDecision, error) {
	var d TrustDecision
	err := c.call(ctx, http.MethodPut, "/trust/"+seg(machine), TrustSetRequest{Policy: p}, &d)
	return d, err
}

// UIAnswer answers a worker dialog with a JSON string, boolean or null.
func (c *Client) UIAnswer(ctx context.Context, requestID string, value json.RawMessage) error {
	return c.call(ctx, http.MethodPost, "/ui/"+seg(requestID), UIAnswerRequest{Value: value}, nil)
}

// Doctor returns the server's health report.
func (c *Client) Doctor(ctx context.Context) (DoctorReport, error) {
	var rep DoctorReport
	err := c.call(ctx, http.MethodGet, "/doctor", nil, &rep)
	return rep, err
}

// Sessions lists the sessions of the registry that match filter, newest
// first.
func (c *Client) Sessions(ctx context.Context, filter SessionFilter) ([]Session, error) {
	q := url.Values{}
	if filter.Machine != "" {
		q.Set("machine", filter.Machine)
	}
	if filter.Kind != "" {
		q.Set("kind", string(filter.Kind))
	}
	var ss []Session
	err := c.call(ctx, http.MethodGet, withQuery("/sessions", q), nil, &ss)
	return ss, err
}

// SearchSessions searches the contents of the agents' sessions.
func (c *Client) SearchSessions(ctx context.Context, search SessionSearch) (SearchResult, error) {
	q := url.Values{"q": {search.Query}}
	if search.Machine != "" {
		q.Set("machine", search.Machine)
	}
	if search.Cwd != "" {
		q.Set("cwd", search.Cwd)
	}
	var res SearchResult
	err := c.call(ctx, http.MethodGet, withQuery("/sessions/search", q), nil, &res)
	return res, err
}

// CreateBaseline primes a baseline session; it returns once the baseline
// is recorded (the priming run may take minutes: bound ctx accordingly).
func (c *Client) CreateBaseline(ctx context.Context, req BaselineRequest) (Baseline, error) {
	var b Baseline
	err := c.call(ctx, http.MethodPost, "/baselines", req, &b)
	return b, err
}

// Transcript returns the last limit entries of the instance's session
// file (0: the server's default).
func (c *Client) Transcript(ctx context.Context, instanceID string, limit int) (Transcript, error) {
	path := "/instances/" + seg(instanceID) + "/transcript"
	if limit > 0 {
		path += "?limit=" + strconv.Itoa(limit)
	}
	var t Transcript
	err := c.call(ctx, http.MethodGet, path, nil, &t)
	return t, err
}

// WebLogin mints a one-time login for the server's web page: its URL
// logs one browser in, once, before it expires. not_supported when the
// server serves no page.
func (c *Client) WebLogin(ctx context.Context) (WebLogin, error) {
	var l WebLogin
	err := c.call(ctx, http.MethodPost, "/web/logins", nil, &l)
	return l, err
}

func withQuery(path string, q url.Values) string {
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

// Watch opens the change stream. It returns once the server confirmed the
// subscription, so no change after Watch returned is missed. Cancel ctx or
// Close the stream to end it. The stream carries a worker's streamed
// updates as deltas, which Next rebuilds: its changes are those of a
// stream without.
func (c *Client) Watch(ctx context.Context) (*Stream, error) {
	path := withQuery("/watch", url.Values{WatchDeltasParam: {"1"}})
	if c.wholeWatch {
		path = "/watch"
	}
	es, err := c.openEvents(ctx, path, "watch")
	if err != nil {
		return nil, err
	}
	return &Stream{eventStream: es, deltas: newDeltaRebuilder()}, nil
}

// Stream is an open watch.
type Stream struct {
	*eventStream
	deltas *deltaRebuilder
}

// Next returns the next change. It returns io.EOF when the server ended
// the stream, or the context's error after cancellation; an error that
// wraps ErrWatchDelta when a streamed update cannot be rebuilt.
func (s *Stream) Next() (Change, error) {
	var w wireChange
	if err := s.next(&w); err != nil {
		return Change{}, err
	}
	return s.deltas.rebuild(w)
}

// OmitEventData makes Next leave every worker event's Data empty (Event
// still names its type), for a reader that shows only what happens to
// agents, instances and tasks: a streamed answer's updates are then never
// written out whole, so an answer of n characters costs the reader O(n),
// not O(n²). Call it before the first Next.
func (s *Stream) OmitEventData() { s.deltas.omit = true }

// eventStream is an open stream of server-sent events, one JSON value per
// event (the watch, the wakes).
type eventStream struct {
	body io.ReadCloser
	r    *eventReader
	what string
}

// openEvents opens the event stream at path and returns once the server
// confirmed the subscription with its opening comment.
func (c *Client) openEvents(ctx context.Context, path, what string) (*eventStream, error) {
	resp, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, err
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != ContentTypeSSE {
		resp.Body.Close()
		return nil, fmt.Errorf("controlapi: %s: answer is %q, not an event stream", what, mt)
	}
	es := &eventStream{body: resp.Body, r: newEventReader(resp.Body), what: what}
	if err := es.r.awaitOpen(); err != nil {
		resp.Body.Close()
		return nil, fmt.Errorf("controlapi: %s: %w", what, err)
	}
	return es, nil
}

// next decodes the next event into v.
func (s *eventStream) next(v any) error {
	data, err := s.r.next()
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("controlapi: %s: bad event %.200q: %w", s.what, data, err)
	}
	return nil
}

// Close ends the stream.
func (s *eventStream) Close() error { return s.body.Close() }

// eventReader reads the data of server-sent events (one JSON per event;
// multi-line data is joined with "\n" as the SSE specification says).
type eventReader struct {
	sc     *bufio.Scanner
	opened bool
}

func newEventReader(r io.Reader) *eventReader {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 4*MaxBodyBytes)
	return &eventReader{sc: sc}
}

// awaitOpen reads up to the end of the opening comment block.
func (er *eventReader) awaitOpen() error {
	for er.sc.Scan() {
		line := er.sc.Text()
		if strings.HasPrefix(line, ":") {
			er.opened = true
			continue
		}
		if line == "" && er.opened {
			return nil
		}
		if line != "" {
			return fmt.Errorf("stream did not open with a comment: %.100q", line)
		}
	}
	if err := er.sc.Err(); err != nil {
		return err
	}
	return io.ErrUnexpectedEOF
}

// next returns the data of the next event that has some.
func (er *eventReader) next() ([]byte, error) {
	var data []byte
	have := false
	for er.sc.Scan() {
		line := strings.TrimSuffix(er.sc.Text(), "\r")
		if line == "" {
			if have {
				return data, nil
			}
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		if field == "data" {
			if have {
				data = append(data, '\n')
			}
			data = append(data, value...)
			have = true
		}
	}
	if err := er.sc.Err(); err != nil {
		return nil, err
	}
	return nil, io.EOF
}
