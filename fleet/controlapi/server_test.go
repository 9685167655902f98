package controlapi

import (
	"context"
	"encoding/json"
	"errors"
	"example.com/pifleet/internal/testnet"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// shortDir is a temporary directory short enough for a unix socket path
// (108 bytes on Linux).
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "capi")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// serve runs a Server over b at addr until the test ends.
func serve(t *testing.T, b Backend, addr Addr, opts ...ServerOption) Addr {
	t.Helper()
	l, err := Listen(addr, ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !addr.IsUnix() {
		addr.Address = l.Addr().String()
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, l, NewServer(b, opts...), time.Second) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return addr
}

func client(t *testing.T, addr Addr, opts ...ClientOption) *Client {
	t.Helper()
	c, err := NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// transports are the two ways a client reaches the server.
func transports(t *testing.T) map[string]func(b Backend) *Client {
	return map[string]func(b Backend) *Client{
		"unix": func(b Backend) *Client {
			return client(t, serve(t, b, DefaultAddr(shortDir(t))))
		},
		"tcp+token": func(b Backend) *Client {
			addr := serve(t, b, Addr{Network: "tcp", Address: "127.0.0.1:0"}, WithToken("s3cret"))
			return client(t, addr, WithBearer("s3cret"))
		},
	}
}

func TestRoundTrips(t *testing.T) {
	for name, connect := range transports(t) {
		t.Run(name, func(t *testing.T) {
			b := newRecordingBackend()
			now := time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)
			b.status = Status{
				Agents:    []Agent{{Name: "gpu-1", State: "connected", Machine: "gpu-1", Policy: "steer", ConnectedAt: &now}},
				Instances: []Instance{{ID: "i-1", Agent: "gpu-1", Cwd: "/src", State: "idle", Bundle: "default", Model: &ModelRef{Provider: "p", ID: "m"}}},
				Tasks:     []Task{{ID: "t-1", InstanceID: "i-1", State: "awaiting_review", MaxRejects: 3}},
			}
			b.output = Output{Tail: []json.RawMessage{json.RawMessage(`{"type":"agent_end"}`)}, LastAssistant: "done"}
			b.tasks = b.status.Tasks
			b.trust = []TrustDecision{{Machine: "gpu-1", Policy: PolicySteer, DecidedAt: now}}
			b.doctor = DoctorReport{Checks: []Check{{Name: "agent gpu-1", Result: CheckPass, Detail: "connected"}}}
			b.prompt = PromptResult{TaskID: "t-2", Reply: "hi", Settled: true}
			b.reject = RejectResult{Escalated: true}
			b.rebundle = RebundleResult{Bundle: "other", BundleHash: "abc"}
			c := connect(b)
			ctx := context.Background()

			st, err := c.Status(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(b.status, st); diff != "" {
				t.Errorf("Status (-sent +received):\n%s", diff)
			}
			res, err := c.Spawn(ctx, SpawnRequest{Agent: "gpu-1", Cwd: "/src", Bundle: "default"}, nil)
			if err != nil || res.InstanceID != "i-1" {
				t.Errorf("Spawn = %+v, %v", res, err)
			}
			pr, err := c.Prompt(ctx, "i-1", PromptRequest{Text: "go", Wait: true, Task: true})
			if err != nil || pr != b.prompt {
				t.Errorf("Prompt = %+v, %v", pr, err)
			}
			must(t, c.Steer(ctx, "i-1", "left"))
			must(t, c.Retry(ctx, "gpu 1"))
			must(t, c.Abort(ctx, "i-1"))
			must(t, c.Stop(ctx, "i-1"))
			out, err := c.Output(ctx, "i-1")
			if err != nil || out.LastAssistant != "done" || len(out.Tail) != 1 || string(out.Tail[0]) != `{"type":"agent_end"}` {
				t.Errorf("Output = %+v, %v", out, err)
			}
			ts, err := c.Tasks(ctx)
			if err != nil || len(ts) != 1 || ts[0].ID != "t-1" {
				t.Errorf("Tasks = %+v, %v", ts, err)
			}
			must(t, c.Accept(ctx, "t-1", DispositionStop))
			must(t, c.Accept(ctx, "t-1", ""))
			rr, err := c.Reject(ctx, "t-1", "use tabs")
			if err != nil || !rr.Escalated {
				t.Errorf("Reject = %+v, %v", rr, err)
			}
			ds, err := c.TrustList(ctx)
			if err != nil || len(ds) != 1 || !ds[0].DecidedAt.Equal(now) {
				t.Errorf("TrustList = %+v, %v", ds, err)
			}
			d, err := c.TrustSet(ctx, "gpu/2", PolicyDeny)
			if err != nil || d.Machine != "gpu/2" || d.Policy != PolicyDeny {
				t.Errorf("TrustSet = %+v, %v", d, err)
			}
			rb, err := c.Rebundle(ctx, "i-1", "other")
			if err != nil || rb != b.rebundle {
				t.Errorf("Rebundle = %+v, %v", rb, err)
			}
			tools, err := c.SetTools(ctx, "i-1", []string{"read", "grep"})
			if err != nil || !cmp.Equal(tools, []string{"read", "grep"}) {
				t.Errorf("SetTools = %v, %v", tools, err)
			}
			must(t, c.SetModel(ctx, "i-1", ModelRef{Provider: "anthropic", ID: "claude/x"}))
			if mp, err := c.PinModel(ctx, "i-1", true); err != nil || !mp.Pinned || mp.InstanceID != "i-1" || mp.Model == nil || mp.Model.ID != "faux-1" {
				t.Errorf("PinModel = %+v, %v", mp, err)
			}
			must(t, c.UIAnswer(ctx, "ui-1", json.RawMessage(`true`)))
			must(t, c.UIAnswer(ctx, "ui-2", nil))
			rep, err := c.Doctor(ctx)
			if err != nil || !rep.OK() || len(rep.Checks) != 1 {
				t.Errorf("Doctor = %+v, %v", rep, err)
			}

			want := strings.Join([]string{
				"Status",
				`Spawn {"agent":"gpu-1","cwd":"/src","bundle":"default"}`,
				`Prompt i-1 {"text":"go","wait":true,"task":true}`,
				`Steer i-1 "left"`,
				"Retry gpu 1", // a path segment is escaped and restored
				"Abort i-1",
				"Stop i-1",
				"Output i-1",
				"Tasks",
				"Accept t-1 stop",
				"Accept t-1 keep_idle", // the default disposition
				`Reject t-1 "use tabs"`,
				"TrustList",
				"TrustSet gpu/2 deny", // a path segment is escaped and restored
				"Rebundle i-1 other",
				`SetTools i-1 ["read","grep"]`,
				`SetModel i-1 {"provider":"anthropic","id":"claude/x"}`,
				"PinModel i-1 true",
				"UIAnswer ui-1 true",
				"UIAnswer ui-2 null",
				"Doctor",
			}, "\n")
			if diff := cmp.Diff(want, b.Calls()); diff != "" {
				t.Errorf("backend calls (-want +got):\n%s", diff)
			}
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Error(err)
	}
}

func TestErrorMapping(t *testing.T) {
	for _, tc := range []struct {
		name       string
		backendErr error
		want       error
		wantStatus int
		wantText   string
	}{
		{"unknown instance", &Error{Code: CodeUnknownInstance, Message: `no instance "i-9"`}, ErrUnknownInstance, 404, `no instance "i-9"`},
		{"wrapped sentinel", errors.Join(errors.New("context"), ErrPolicyRefused), ErrPolicyRefused, 403, "context"},
		{"spawn error", &Error{Code: CodeSpawnError, Detail: "platform_mismatch", Message: "linux-arm64 only"}, ErrSpawn, 422, "platform_mismatch"},
		{"invalid state", &Error{Code: CodeInvalidState, Message: "stopped"}, ErrInvalidState, 409, "stopped"},
		{"not connected", &Error{Code: CodeNotConnected, Message: "gpu-1"}, ErrNotConnected, 503, "gpu-1"},
		{"plain error", errors.New("disk on fire"), ErrInternal, 500, "disk on fire"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newRecordingBackend()
			b.err = tc.backendErr
			addr := serve(t, b, DefaultAddr(shortDir(t)))
			c := client(t, addr)
			err := c.Stop(context.Background(), "i-9")
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.wantText) {
				t.Errorf("Stop error = %v; want errors.Is %v and text %q", err, tc.want, tc.wantText)
			}
			// Other codes do not match.
			if tc.want != ErrInternal && errors.Is(err, ErrInternal) {
				t.Errorf("%v matches ErrInternal", err)
			}
			var e *Error
			if errors.As(err, &e) && e.Code.HTTPStatus() != tc.wantStatus {
				t.Errorf("status of %s = %d, want %d", e.Code, e.Code.HTTPStatus(), tc.wantStatus)
			}
			// The wire carries the status too.
			resp := rawRequest(t, addr, "", http.MethodPost, "/v1/instances/i-9/stop", "")
			if resp.StatusCode != tc.wantStatus {
				t.Errorf("HTTP status = %d, want %d", resp.StatusCode, tc.wantStatus)
			}
		})
	}
}

// rawRequest sends a request without the Client.
func rawRequest(t *testing.T, addr Addr, token, method, path, body string) *http.Response {
	t.Helper()
	tr := &http.Transport{}
	base := "http://" + addr.Address
	if addr.IsUnix() {
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", addr.Address)
		}
		base = "http://x"
	}
	t.Cleanup(tr.CloseIdleConnections)
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(strings.NewReader(string(b)))
	return resp
}

func TestBadRequests(t *testing.T) {
	b := newRecordingBackend()
	addr := serve(t, b, DefaultAddr(shortDir(t)))
	for _, tc := range []struct {
		method, path, body string
		code               Code
		text               string
	}{
		{"POST", "/v1/instances", `{"agent":"a","cwd":"/x"}`, CodeBadRequest, "needs a bundle"},
		{"POST", "/v1/instances", `{"agent":`, CodeBadRequest, "body"},
		{"POST", "/v1/instances/i-1/prompt", `{}`, CodeBadRequest, "needs a text"},
		{"POST", "/v1/tasks/t-1/accept", `{"disposition":"later"}`, CodeBadRequest, `"later"`},
		{"POST", "/v1/tasks/t-1/reject", `{"feedback":"  "}`, CodeBadRequest, "feedback"},
		{"PUT", "/v1/trust/m", `{"policy":"maybe"}`, CodeBadRequest, "allow, steer or deny"},
		{"PUT", "/v1/instances/i-1/model", `{"provider":"p"}`, CodeBadRequest, "provider and an id"},
		{"POST", "/v1/ui/r-1", `{"value":{"a":1}}`, CodeBadRequest, "string, a boolean or null"},
		{"POST", "/v1/instances/i-1/steer", strings.Repeat(" ", MaxBodyBytes+1) + "{}", CodeBadRequest, "larger than"},
		{"GET", "/v1/instances/i-1/read", "", CodeBadRequest, "needs a path"},
		{"GET", "/v1/instances/i-1/read?path=a&offset=-1", "", CodeBadRequest, "offset"},
		{"GET", "/v1/instances/i-1/read?path=a&limit=x", "", CodeBadRequest, "limit"},
		{"GET", "/v1/instances/i-1/diff?staged=perhaps", "", CodeBadRequest, "staged"},
		{"GET", "/v1/instances/i-1/grep?glob=*.go", "", CodeBadRequest, "needs a pattern"},
		{"GET", "/v1/teleport", "", CodeUnknownEndpoint, "/v1/teleport"},
		{"DELETE", "/v1/status", "", CodeUnknownEndpoint, "DELETE"},
	} {
		resp := rawRequest(t, addr, "", tc.method, tc.path, tc.body)
		var e Error
		if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
			t.Errorf("%s %s: %v", tc.method, tc.path, err)
			continue
		}
		if e.Code != tc.code || !strings.Contains(e.Message, tc.text) || resp.StatusCode != tc.code.HTTPStatus() {
			t.Errorf("%s %s = %d %+v; want %s mentioning %q", tc.method, tc.path, resp.StatusCode, e, tc.code, tc.text)
		}
	}
	if calls := b.Calls(); calls != "" {
		t.Errorf("bad requests reached the backend:\n%s", calls)
	}
}

// The file endpoints pass every parameter to the backend and the answer
// back unchanged; the agent's refusal keeps its code.
func TestFileRoundTrips(t *testing.T) {
	b := newRecordingBackend()
	text := "diff --git a/x b/x\n"
	size := int64(12)
	b.file = FileResult{Text: &text, Entries: []FileEntry{{Name: "main.go", Kind: "file", Bytes: &size}, {Name: "docs", Kind: "dir"}}, Truncated: true}
	c := client(t, serve(t, b, DefaultAddr(shortDir(t))))
	ctx := context.Background()
	for name, call := range map[string]func() (FileResult, error){
		"diff": func() (FileResult, error) {
			return c.Diff(ctx, "i-1", DiffQuery{Ref: "main~1", Staged: true, Stat: true})
		},
		"read": func() (FileResult, error) {
			return c.ReadFile(ctx, "i-1", ReadQuery{Path: "dir/a b.go", Offset: 10, Limit: 5})
		},
		"list": func() (FileResult, error) { return c.ListDir(ctx, "i-1", "src") },
		"grep": func() (FileResult, error) { return c.Grep(ctx, "i-1", GrepQuery{Pattern: "func [A-Z]", Glob: "*.go"}) },
	} {
		got, err := call()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if diff := cmp.Diff(b.file, got); diff != "" {
			t.Errorf("%s (-sent +received):\n%s", name, diff)
		}
	}
	want := []string{
		`Diff i-1 {"Ref":"main~1","Staged":true,"Stat":true}`,
		`Grep i-1 {"Pattern":"func [A-Z]","Glob":"*.go"}`,
		`ListDir i-1 "src"`,
		`ReadFile i-1 {"Path":"dir/a b.go","Offset":10,"Limit":5}`,
	}
	calls := strings.Split(b.Calls(), "\n")
	slices.Sort(calls)
	if diff := cmp.Diff(want, calls); diff != "" {
		t.Errorf("backend calls (-want +got):\n%s", diff)
	}

	b.err = &Error{Code: CodeFileError, Detail: "not_a_repo", Message: "not a git repository"}
	if _, err := c.Diff(ctx, "i-1", DiffQuery{}); !errors.Is(err, ErrFileError) || !strings.Contains(err.Error(), "not_a_repo") {
		t.Errorf("Diff outside a repository: %v", err)
	}
}

func TestSpawnStreamsProgress(t *testing.T) {
	b := newRecordingBackend()
	b.spawnProgress = []SpawnProgress{
		{Phase: "accepted"},
		{Phase: "provisioning", FilesTotal: 3, FilesFetched: 1, BytesFetched: 10},
		{Phase: "provisioning", FilesTotal: 3, FilesFetched: 3, BytesFetched: 30},
		{Phase: "starting"},
	}
	c := client(t, serve(t, b, DefaultAddr(shortDir(t))))
	var got []SpawnProgress
	res, err := c.Spawn(context.Background(), SpawnRequest{Agent: "a", Cwd: "/", Bundle: "b"}, func(p SpawnProgress) { got = append(got, p) })
	if err != nil || res.InstanceID != "i-1" {
		t.Fatalf("Spawn = %+v, %v", res, err)
	}
	if diff := cmp.Diff(b.spawnProgress, got); diff != "" {
		t.Errorf("progress (-sent +received):\n%s", diff)
	}

	// A refusal after progress started arrives as the stream's last line,
	// still a typed error.
	b.spawnErr = &Error{Code: CodeSpawnError, Detail: "max_workers", Message: "machine full"}
	got = nil
	_, err = c.Spawn(context.Background(), SpawnRequest{Agent: "a", Cwd: "/", Bundle: "b"}, func(p SpawnProgress) { got = append(got, p) })
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrSpawn) || e.Detail != "max_workers" || len(got) != 4 {
		t.Errorf("Spawn = %v (progress %d); want spawn_error max_workers after 4 steps", err, len(got))
	}
	// Before any progress: a plain error answer.
	b.spawnProgress = nil
	_, err = c.Spawn(context.Background(), SpawnRequest{Agent: "a", Cwd: "/", Bundle: "b"}, nil)
	if !errors.Is(err, ErrSpawn) {
		t.Errorf("Spawn without progress = %v; want spawn_error", err)
	}
}

func TestWatchOrderAndCancellation(t *testing.T) {
	for name, connect := range transports(t) {
		t.Run(name, func(t *testing.T) {
			b := newRecordingBackend()
			c := connect(b)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s, err := c.Watch(ctx)
			if err != nil {
				t.Fatal(err)
			}
			serverCtx := <-b.watchCtx
			const n = 200
			go func() {
				for i := range n {
					select {
					case b.changes <- Change{Kind: ChangeInstanceState, InstanceID: "i-1", Event: "e", Message: strings.Repeat("x", i), From: "a\nb"}:
					case <-serverCtx.Done():
						return
					}
				}
			}()
			for i := range n {
				ch, err := s.Next()
				if err != nil {
					t.Fatalf("change %d: %v", i, err)
				}
				if ch.Seq != uint64(i+1) || len(ch.Message) != i || ch.From != "a\nb" {
					t.Fatalf("change %d = seq %d, message of %d bytes, from %q; want in order", i, ch.Seq, len(ch.Message), ch.From)
				}
			}
			// Cancelling the client ends the server's subscription.
			cancel()
			<-serverCtx.Done()
			if _, err := s.Next(); err == nil {
				t.Error("Next after cancel: no error")
			}
			s.Close()
		})
	}
}

func TestWatchEndsWhenServerStops(t *testing.T) {
	b := newRecordingBackend()
	dir := shortDir(t)
	l, err := Listen(DefaultAddr(dir), ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, l, NewServer(b), time.Minute) }()
	c := client(t, DefaultAddr(dir))
	s, err := c.Watch(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	<-b.watchCtx
	// Shutdown must not wait the minute of grace for the open stream.
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
	if _, err := s.Next(); !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("Next after shutdown = %v, want EOF", err)
	}
}

func TestTokenAuth(t *testing.T) {
	b := newRecordingBackend()
	addr := serve(t, b, Addr{Network: "tcp", Address: "127.0.0.1:0"}, WithToken("right"))
	for _, tc := range []struct {
		name string
		opts []ClientOption
	}{{"none", nil}, {"wrong", []ClientOption{WithBearer("wrong")}}, {"prefix", []ClientOption{WithBearer("righ")}}} {
		_, err := client(t, addr, tc.opts...).Status(context.Background())
		if !errors.Is(err, ErrUnauthorized) {
			t.Errorf("%s token: %v, want unauthorized", tc.name, err)
		}
	}
	if resp := rawRequest(t, addr, "", "GET", "/v1/status", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no token: HTTP %d", resp.StatusCode)
	}
	if calls := b.Calls(); calls != "" {
		t.Errorf("unauthorized requests reached the backend: %s", calls)
	}
	if _, err := client(t, addr, WithBearer("right")).Status(context.Background()); err != nil {
		t.Errorf("right token: %v", err)
	}
}

func TestNotRunning(t *testing.T) {
	dir := shortDir(t)
	closed := testnet.UnusedAddr(t, "127.0.0.1") // nothing listens there
	for _, addr := range []Addr{DefaultAddr(dir), {Network: "tcp", Address: closed}} {
		_, err := client(t, addr).Status(context.Background())
		want := "pifleet-server is not running at " + addr.String() + " (start it with pifleet-server serve)"
		if !errors.Is(err, ErrNotRunning) || err.Error() != want {
			t.Errorf("%s: %v; want %q", addr, err, want)
		}
	}
}

func TestNotAPifleetServer(t *testing.T) {
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "teapot", http.StatusTeapot)
	})}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go hs.Serve(l)
	defer hs.Close()
	_, err = client(t, Addr{Network: "tcp", Address: l.Addr().String()}).Status(context.Background())
	if !errors.Is(err, ErrInternal) || !strings.Contains(err.Error(), "is this a pifleet-server?") {
		t.Errorf("Status against another server = %v", err)
	}
}

func TestListenRefusesNonLoopback(t *testing.T) {
	for _, a := range []string{"0.0.0.0:0", "[::]:0", ":0", "10.1.2.3:9789", "100.64.0.1:9789"} {
		addr, err := ParseAddr(a)
		if err != nil {
			t.Errorf("ParseAddr(%q): %v", a, err)
			continue
		}
		l, err := Listen(addr, ListenOptions{})
		if err == nil {
			l.Close()
		}
		if !errors.Is(err, ErrNotLoopback) || !strings.Contains(err.Error(), a) {
			t.Errorf("Listen(%q) = %v; want a not-loopback refusal naming it", a, err)
		}
	}
	for _, a := range []string{"127.0.0.1:0", "localhost:0", "[::1]:0"} {
		addr, _ := ParseAddr(a)
		l, err := Listen(addr, ListenOptions{})
		if err != nil {
			if a == "[::1]:0" { // a machine without IPv6 loopback
				t.Logf("Listen(%q): %v", a, err)
				continue
			}
			t.Errorf("Listen(%q): %v", a, err)
			continue
		}
		l.Close()
	}
}

func TestUnixSocket(t *testing.T) {
	dir := filepath.Join(shortDir(t), "state")
	addr := DefaultAddr(dir)
	l, err := Listen(addr, ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(addr.Address)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("socket mode %v, want 0600", fi.Mode().Perm())
	}
	if di, _ := os.Stat(dir); di.Mode().Perm() != 0o700 {
		t.Errorf("state dir mode %v, want 0700", di.Mode().Perm())
	}
	// A live server is not displaced.
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if l2, err := Listen(addr, ListenOptions{}); err == nil || !strings.Contains(err.Error(), "already listens") {
		t.Errorf("second Listen = %v; want already listens", err)
		if l2 != nil {
			l2.Close()
		}
	}
	// A socket left behind by a dead server is replaced. Closing a unix
	// listener removes its file, so leave one behind deliberately.
	ul := l.(*net.UnixListener)
	ul.SetUnlinkOnClose(false)
	ul.Close()
	l3, err := Listen(addr, ListenOptions{})
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	l3.Close()
	// Something else at the path is never removed.
	if err := os.WriteFile(addr.Address, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(addr, ListenOptions{}); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("Listen over a file = %v", err)
	}
}

func TestToken(t *testing.T) {
	path := filepath.Join(shortDir(t), "st", TokenName)
	tok, err := LoadOrCreateToken(path)
	if err != nil || len(tok) < 40 {
		t.Fatalf("LoadOrCreateToken = %q, %v", tok, err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Errorf("token mode %v", fi.Mode().Perm())
	}
	again, err := LoadOrCreateToken(path)
	if err != nil || again != tok {
		t.Errorf("second load = %q, %v; want the same token", again, err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadToken(path); err == nil || !strings.Contains(err.Error(), "0600") {
		t.Errorf("ReadToken of a 0644 file = %v", err)
	}
}

func TestParseAddr(t *testing.T) {
	for in, want := range map[string]Addr{
		"unix:/run/p.sock":     {"unix", "/run/p.sock"},
		"unix:///run/p.sock":   {"unix", "/run/p.sock"},
		"unix:rel/p.sock":      {"unix", "rel/p.sock"},
		"/var/lib/x/../c.sock": {"unix", "/var/lib/c.sock"},
		"127.0.0.1:9789":       {"tcp", "127.0.0.1:9789"},
		"localhost:9789":       {"tcp", "localhost:9789"},
		"[::1]:9789":           {"tcp", "[::1]:9789"},
	} {
		got, err := ParseAddr(in)
		if err != nil || got != want {
			t.Errorf("ParseAddr(%q) = %+v, %v; want %+v", in, got, err, want)
		}
		if back, err := ParseAddr(got.String()); err != nil || back != got {
			t.Errorf("ParseAddr(%q.String()) = %+v, %v", in, back, err)
		}
	}
	for _, bad := range []string{"", "unix:", "example.com:80", "127.0.0.1", "127.0.0.1:port", "127.0.0.1:99999", "rel/path.sock"} {
		if _, err := ParseAddr(bad); !errors.Is(err, ErrBadAddr) {
			t.Errorf("ParseAddr(%q) = %v, want ErrBadAddr", bad, err)
		}
	}
}

func TestParseModelRef(t *testing.T) {
	m, err := ParseModelRef("openrouter/anthropic/claude")
	if err != nil || m != (ModelRef{Provider: "openrouter", ID: "anthropic/claude"}) || m.String() != "openrouter/anthropic/claude" {
		t.Errorf("ParseModelRef = %+v, %v", m, err)
	}
	for _, bad := range []string{"", "claude", "/x", "p/"} {
		if _, err := ParseModelRef(bad); !errors.Is(err, ErrBadRequest) {
			t.Errorf("ParseModelRef(%q) = %v", bad, err)
		}
	}
}
