package webui

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"example.com/pifleet/fleet/controlapi"
	"example.com/pifleet/internal/browsertest"
)

// step bounds each browser step; it never paces a test.
const step = 20 * time.Second

// fakeFleet is a scripted Backend for the page's own tests: a fleet of
// instances and tasks set by the test, and a watch stream it feeds. The
// real fleet behind the page is tested in cmd/pifleet-server.
type fakeFleet struct {
	controlapi.Backend // what a test does not script panics

	mu         sync.Mutex
	status     controlapi.Status
	output     map[string]controlapi.Output
	transcript map[string]controlapi.Transcript
	calls      []string
	watchers   []chan controlapi.Change
}

func newFakeFleet() *fakeFleet {
	return &fakeFleet{output: map[string]controlapi.Output{}, transcript: map[string]controlapi.Transcript{}}
}

func (f *fakeFleet) record(s string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, s)
}

func (f *fakeFleet) Calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeFleet) Status(context.Context) (controlapi.Status, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, _ := json.Marshal(f.status) // a copy: the test may change it meanwhile
	var st controlapi.Status
	_ = json.Unmarshal(b, &st)
	return st, nil
}

func (f *fakeFleet) setStatus(fn func(*controlapi.Status)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(&f.status)
}

func (f *fakeFleet) Output(_ context.Context, id string) (controlapi.Output, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.output[id], nil
}

// Transcript answers the newest limit entries, as the fleet does.
func (f *fakeFleet) Transcript(_ context.Context, id string, limit int) (controlapi.Transcript, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.transcript[id]
	if limit > 0 && len(t.Entries) > limit {
		t = controlapi.Transcript{Entries: t.Entries[len(t.Entries)-limit:], Truncated: true}
	}
	return t, nil
}

// sampleDiff is the working tree of every fake instance.
const sampleDiff = `diff --git a/handler.go b/handler.go
index 8e4b631..6faf3e7 100644
--- a/handler.go
+++ b/handler.go
@@ -12,7 +12,9 @@ func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
 	if r.Method != http.MethodGet {
-		http.Error(w, "bad method", 400)
+		w.Header().Set("Allow", "GET")
+		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
 		return
 	}
`

func (f *fakeFleet) Diff(context.Context, string, controlapi.DiffQuery) (controlapi.FileResult, error) {
	d := sampleDiff
	return controlapi.FileResult{Text: &d}, nil
}

func (f *fakeFleet) TaskDiff(_ context.Context, id string, _ bool) (controlapi.FileResult, error) {
	f.record("task diff " + id)
	d := sampleDiff
	return controlapi.FileResult{Text: &d}, nil
}

func (f *fakeFleet) Deliver(_ context.Context, id string, req controlapi.DeliverRequest) (controlapi.Delivery, error) {
	f.record(fmt.Sprintf("deliver %s %s %s", id, req.Mode, req.Target))
	return controlapi.Delivery{Mode: req.Mode}, nil
}

func (f *fakeFleet) Spawn(_ context.Context, req controlapi.SpawnRequest, progress func(controlapi.SpawnProgress)) (controlapi.SpawnResult, error) {
	b, _ := json.Marshal(req)
	f.record("spawn " + string(b))
	progress(controlapi.SpawnProgress{Phase: "accepted"})
	progress(controlapi.SpawnProgress{Phase: "provisioning", FilesTotal: 12, FilesFetched: 12})
	return controlapi.SpawnResult{InstanceID: "i-c88e0f27"}, nil
}

func (f *fakeFleet) CreateBaseline(_ context.Context, req controlapi.BaselineRequest) (controlapi.Baseline, error) {
	f.record(fmt.Sprintf("baseline %s %s %s %s", req.Agent, req.Cwd, req.Bundle, req.Repo))
	return controlapi.Baseline{Machine: req.Agent, Cwd: req.Cwd, Name: "baseline:" + req.Repo}, nil
}

func (f *fakeFleet) Sessions(context.Context, controlapi.SessionFilter) ([]controlapi.Session, error) {
	return []controlapi.Session{{Machine: "box-0", SessionID: "01a2b3c4", Path: "/home/ana/.pi/agent/sessions/--src-api--/base.jsonl",
		Name: "baseline:api", Cwd: "/src/api", Kind: controlapi.KindBaseline, Pinned: true, UpdatedAt: time.Now().Add(-3 * time.Hour)}}, nil
}

func (f *fakeFleet) Accept(_ context.Context, id string, d controlapi.Disposition) error {
	f.record(fmt.Sprintf("accept %s %s", id, d))
	return nil
}

func (f *fakeFleet) Reject(_ context.Context, id, feedback string) (controlapi.RejectResult, error) {
	f.record(fmt.Sprintf("reject %s %q", id, feedback))
	return controlapi.RejectResult{}, nil
}

func (f *fakeFleet) Watch(ctx context.Context) (<-chan controlapi.Change, error) {
	ch := make(chan controlapi.Change, 4096)
	f.mu.Lock()
	f.watchers = append(f.watchers, ch)
	f.mu.Unlock()
	out := make(chan controlapi.Change)
	go func() {
		defer close(out)
		for {
			select {
			case <-ctx.Done():
				return
			case c := <-ch:
				select {
				case out <- c:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}

// publish sends c to every watcher; false when one's buffer is full.
func (f *fakeFleet) publish(c controlapi.Change) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	ok := true
	for _, w := range f.watchers {
		select {
		case w <- c:
		default:
			ok = false
		}
	}
	return ok
}

// page serves the web page over b on loopback until the test ends, with
// the control API in front as pifleet-server wires it.
type page struct {
	URL  string
	Auth *controlapi.WebAuth
}

func servePage(t testing.TB, b controlapi.Backend) page {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + l.Addr().String()
	auth := controlapi.NewWebAuth(base, "the-token")
	api := controlapi.NewServer(b, controlapi.WithToken("the-token"), controlapi.WithWebAuth(auth))
	h := New(api, auth, Options{Hosts: LoopbackHosts(l.Addr().String())})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- controlapi.Serve(ctx, l, h, time.Second) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return page{URL: base, Auth: auth}
}

// login opens the page in the browser through a one-time login.
func (p page) login(t testing.TB, ctx context.Context) {
	t.Helper()
	if err := browsertest.Within(ctx, step,
		chromedp.Navigate(p.Auth.NewLogin().URL),
		chromedp.WaitVisible(chromedp.CSS("#live.on")),
	); err != nil {
		t.Fatalf("login: %v", err)
	}
	browsertest.CatchErrors(t, ctx)
}

// hostile is worker output that would run script if the page parsed it.
const hostile = `<script>window.__pwned = "script"</script><img src=x onerror="window.__pwned = 'img'"> done`

func TestWorkerOutputIsShownAsText(t *testing.T) {
	b := newFakeFleet()
	b.status = controlapi.Status{
		Agents: []controlapi.Agent{{Name: "box", State: "established", Policy: "steer", Platform: "linux-x64"}},
		Instances: []controlapi.Instance{{ID: "i-1", Agent: "box", Cwd: "/src/<b>app</b>", State: "awaiting_review",
			Bundle: "default", Activity: `<img src=x onerror="window.__pwned='activity'">`, OpenTask: "t-1"}},
		Tasks: []controlapi.Task{{ID: "t-1", InstanceID: "i-1", Agent: "box", State: "awaiting_review", Prompt: hostile,
			MaxRejects: 3, LastDone: &controlapi.TaskDone{Status: "settled", LastAssistantMessage: hostile}}},
	}
	b.transcript["i-1"] = controlapi.Transcript{Entries: []json.RawMessage{
		entry("e1", `{"role":"user","content":[{"type":"text","text":"please <script>alert(1)</script>"}],"timestamp":1}`),
		entry("e2", `{"role":"assistant","content":[{"type":"thinking","thinking":"<img src=x onerror=\"window.__pwned='thinking'\">"},`+
			`{"type":"text","text":`+jsonString(hostile)+`},{"type":"toolCall","id":"c1","name":"bash","arguments":{"command":"echo '<script>x</script>'"}}],"timestamp":2}`),
		entry("e3", `{"role":"toolResult","toolCallId":"c1","toolName":"bash","content":[{"type":"text","text":"<img src=x onerror=\"window.__pwned='tool'\">"}],"isError":false,"timestamp":3}`),
	}}
	p := servePage(t, b)
	ctx := browsertest.New(t, browsertest.Options{})
	p.login(t, ctx)

	// The review shows the prompt and the last message as text.
	if err := browsertest.Within(ctx, step,
		chromedp.Navigate(p.URL+"/#/review"),
		chromedp.WaitVisible(chromedp.CSS(`article.review[data-task="t-1"] .last`)),
	); err != nil {
		t.Fatal(err)
	}
	last, err := browsertest.Eval[string](ctx, step, `document.querySelector('article.review .last').textContent`)
	if err != nil || last != hostile {
		t.Errorf("last message shown as %q (%v), want the text %q", last, err, hostile)
	}
	// The worker's transcript and card.
	if err := browsertest.Within(ctx, step,
		chromedp.Navigate(p.URL+"/#/worker/i-1"),
		chromedp.WaitVisible(chromedp.CSS(`#w-transcript li.tool .result pre`)),
	); err != nil {
		t.Fatal(err)
	}
	text, err := browsertest.Eval[string](ctx, step, `document.querySelector('#w-transcript').textContent`)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"please <script>alert(1)</script>", hostile, `onerror="window.__pwned='tool'"`, "echo '<script>x</script>'"} {
		if !strings.Contains(text, want) {
			t.Errorf("transcript lacks the text %q:\n%s", want, text)
		}
	}
	if err := browsertest.Within(ctx, step, chromedp.Navigate(p.URL+"/#/workers"), chromedp.WaitVisible(chromedp.CSS(`[data-instance="i-1"]`))); err != nil {
		t.Fatal(err)
	}
	type verdict struct {
		Pwned   any `json:"pwned"`
		Images  int `json:"images"`
		Scripts int `json:"scripts"`
	}
	v, err := browsertest.Eval[verdict](ctx, step,
		`({pwned: window.__pwned ?? null, images: document.querySelectorAll('main img').length, scripts: document.querySelectorAll('main script').length})`)
	if err != nil {
		t.Fatal(err)
	}
	if v.Pwned != nil || v.Images != 0 || v.Scripts != 0 {
		t.Errorf("worker output became markup: %+v", v)
	}
	browsertest.Shot(t, ctx, "xss", false)
}

func entry(id, message string) json.RawMessage {
	return json.RawMessage(`{"type":"message","id":"` + id + `","parentId":null,"timestamp":"2026-12-01T20:00:00Z","message":` + message + `}`)
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestRequestsWithoutSessionOrCSRFAreRefused checks the page's guard at
// the HTTP level: no cookie, no CSRF token, a foreign Host.
func TestRequestsWithoutSessionOrCSRFAreRefused(t *testing.T) {
	b := newFakeFleet()
	p := servePage(t, b)
	hc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	// Log in as a browser would.
	resp, err := hc.Get(p.Auth.NewLogin().URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 {
		t.Fatalf("login: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	cookie := resp.Cookies()[0]
	csrfOf := func() string {
		r := httptest.NewRequest("GET", "/", nil)
		r.AddCookie(cookie)
		c, _ := p.Auth.Session(r)
		return c
	}

	do := func(method, path string, set func(*http.Request)) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, p.URL+path, strings.NewReader(`{"feedback":"no"}`))
		if set != nil {
			set(req)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	withCookie := func(r *http.Request) { r.AddCookie(cookie) }
	cases := []struct {
		name   string
		method string
		path   string
		set    func(*http.Request)
		want   int
	}{
		{"API without cookie", "GET", "/v1/status", nil, 401},
		{"change without cookie", "POST", "/v1/tasks/t-1/reject", func(r *http.Request) { r.Header.Set(controlapi.CSRFHeader, csrfOf()) }, 401},
		{"change without CSRF token", "POST", "/v1/tasks/t-1/reject", withCookie, 403},
		{"logout without CSRF token", "POST", "/logout", withCookie, 403},
		{"foreign Host (DNS rebinding)", "GET", "/v1/status", func(r *http.Request) { withCookie(r); r.Host = "evil.example:80" }, 421},
		{"used login link", "GET", "/login?code=nope", nil, 401},
		{"reads with cookie", "GET", "/v1/status", withCookie, 200},
		{"change with cookie and CSRF token", "POST", "/v1/tasks/t-1/reject", func(r *http.Request) {
			withCookie(r)
			r.Header.Set(controlapi.CSRFHeader, csrfOf())
		}, 200},
	}
	for _, c := range cases {
		resp := do(c.method, c.path, c.set)
		if resp.StatusCode != c.want {
			t.Errorf("%s: %s %s = %d, want %d", c.name, c.method, c.path, resp.StatusCode, c.want)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); csp != ContentSecurityPolicy {
			t.Errorf("%s: CSP %q", c.name, csp)
		}
	}
	if got := b.Calls(); len(got) != 1 || got[0] != `reject t-1 "no"` {
		t.Errorf("backend calls %q, want only the one with cookie and CSRF token", got)
	}
	// The page without a session is the login page, not the app.
	resp = do("GET", "/", nil)
	if resp.StatusCode != 200 {
		t.Errorf("page without session: %d", resp.StatusCode)
	}
}

func (f *fakeFleet) Abort(_ context.Context, id string) error {
	f.record("abort " + id)
	return nil
}

func (f *fakeFleet) Steer(_ context.Context, id, text string) error {
	f.record(fmt.Sprintf("steer %s %q", id, text))
	return nil
}

func (f *fakeFleet) SearchSessions(_ context.Context, q controlapi.SessionSearch) (controlapi.SearchResult, error) {
	f.record(fmt.Sprintf("search %q", q.Query))
	return controlapi.SearchResult{Hits: []controlapi.SessionHit{{Machine: "box-0", SessionID: "01a2b3c4",
		Path: "/home/ana/.pi/agent/sessions/--src-api--/base.jsonl", Snippet: "…the <b>retry</b> loop backs off…"}}}, nil
}

func (f *fakeFleet) Resume(_ context.Context, req controlapi.ResumeRequest, progress func(controlapi.SpawnProgress)) (controlapi.SpawnResult, error) {
	f.record(fmt.Sprintf("resume %s %s %s", req.Session, req.Machine, req.Mode))
	progress(controlapi.SpawnProgress{Phase: "accepted"})
	return controlapi.SpawnResult{InstanceID: "i-3f9a21c0"}, nil
}

func (f *fakeFleet) UIAnswer(_ context.Context, id string, v json.RawMessage) error {
	f.record(fmt.Sprintf("ui %s %s", id, v))
	return nil
}

func (f *fakeFleet) Doctor(context.Context) (controlapi.DoctorReport, error) {
	return controlapi.DoctorReport{Checks: []controlapi.Check{
		{Name: "bundle cache on gpu-1", Result: controlapi.CheckPass, Detail: "3 bundles intact"},
		{Name: "bundle cache on buildbox", Result: controlapi.CheckFail, Detail: "default: skills/review/SKILL.md changed on disk"},
	}}, nil
}

func ptr[T any](v T) *T { return &v }

// showcase is a fleet in the middle of a working day.
func showcase() controlapi.Status {
	now := time.Now()
	ago := func(d time.Duration) *time.Time { t := now.Add(-d); return &t }
	sonnet := &controlapi.ModelRef{Provider: "anthropic", ID: "claude-sonnet-4"}
	return controlapi.Status{
		Agents: []controlapi.Agent{
			{Name: "buildbox", State: "established", Policy: "steer", Platform: "linux-x64", Version: "0.4.0", MaxWorkers: 4, Addr: "100.64.0.7:9788", ConnectedAt: ago(3 * time.Hour)},
			{Name: "gpu-1", State: "established", Policy: "steer", Platform: "linux-x64", Version: "0.4.0", Addr: "100.64.0.2:9788", ConnectedAt: ago(26 * time.Minute)},
			{Name: "mac-mini", State: "established", Policy: "allow", Platform: "darwin-arm64", Version: "0.4.0", Addr: "100.64.0.9:9788", ConnectedAt: ago(2 * time.Hour)},
			{Name: "old-laptop", State: "lost", Policy: "steer", Platform: "linux-x64", Version: "0.3.2", Addr: "100.64.0.4:9788", LostAt: ago(7 * time.Minute), LastError: "heartbeat expired: no frame for 45s"},
		},
		Instances: []controlapi.Instance{
			{ID: "i-3f9a21c0", Agent: "buildbox", Cwd: "/src/api", State: "running", Bundle: "default", Model: sonnet, Activity: "bash", ActivityAt: ago(4 * time.Second), Cost: 0.4182, OpenTask: "t-flaky",
				Turns: 7, Budget: &controlapi.Budget{MaxCost: ptr(2.0), MaxTurns: ptr(30.0)}},
			{ID: "i-7b02e611", Agent: "buildbox", Cwd: "/src/api", State: "awaiting_review", Bundle: "default", Model: sonnet, Activity: "settled", ActivityAt: ago(2 * time.Minute), Cost: 0.2210, OpenTask: "t-405",
				Turns: 12, Budget: &controlapi.Budget{MaxCost: ptr(2.0), MaxTurns: ptr(30.0)}},
			{ID: "i-a41d5e93", Agent: "gpu-1", Cwd: "/src/trainer", State: "idle", Bundle: "ml", Model: &controlapi.ModelRef{Provider: "openai", ID: "gpt-5"}, Activity: "settled", ActivityAt: ago(9 * time.Minute), Cost: 1.0375,
				PendingUI: []controlapi.UIRequest{{ID: "ui-12", InstanceID: "i-a41d5e93", Kind: "confirm", Title: "Delete checkpoints/ (4.2 GB)?"}}},
			{ID: "i-c88e0f27", Agent: "gpu-1", Cwd: "/src/trainer", State: "provisioning", Bundle: "ml"},
			{ID: "i-d5510b4e", Agent: "mac-mini", Cwd: "/Users/ana/app", State: "escalated", Bundle: "ios", Model: sonnet, Activity: "settled", ActivityAt: ago(31 * time.Minute), Cost: 0.8811, OpenTask: "t-ui"},
			{ID: "i-e0917aa3", Agent: "old-laptop", Cwd: "/home/ana/site", State: "unreachable", Bundle: "default", Model: sonnet, Activity: "edit", ActivityAt: ago(8 * time.Minute), Cost: 0.0930},
		},
		Tasks: []controlapi.Task{
			{ID: "t-flaky", InstanceID: "i-3f9a21c0", Agent: "buildbox", State: "running", Prompt: "make TestRetryBackoff pass reliably", MaxRejects: 3},
			{ID: "t-405", InstanceID: "i-7b02e611", Agent: "buildbox", State: "awaiting_review", Prompt: "answer 405 with an Allow header for non-GET requests", Rejects: 1, MaxRejects: 3,
				Feedback: []controlapi.Feedback{{Text: "use http.StatusMethodNotAllowed, not a literal"}},
				Branch:   "pifleet/t-405-allow-header", Base: "5724ab3c91d2e0f1", DiffStat: &controlapi.DiffStat{Files: 1, Insertions: 2, Deletions: 1},
				LastDone: &controlapi.TaskDone{Status: "settled", LastAssistantMessage: "Done: non-GET requests now get 405 Method Not Allowed with an Allow: GET header. Added TestServeHTTPRejectsPost; go test ./... passes."}},
			{ID: "t-ui", InstanceID: "i-d5510b4e", Agent: "mac-mini", State: "escalated", Prompt: "fix the layout of the settings screen on small phones", Rejects: 4, MaxRejects: 3,
				LastDone: &controlapi.TaskDone{Status: "settled", LastAssistantMessage: "I constrained the stack view; the labels still truncate below 340 pt."}},
		},
	}
}

// TestShowcase drives the page over a varied fleet: a lost agent shows
// as lost, a worker's dialog is answered in place, the cache check fills
// the agents table, and the review offers the diff; the screenshots in
// docs/ are made here and in TestWebPageDrivesARealPiWorker.
func TestShowcase(t *testing.T) {
	b := newFakeFleet()
	b.status = showcase()
	p := servePage(t, b)
	ctx := browsertest.New(t, browsertest.Options{Width: 1360, Height: 860})
	p.login(t, ctx)
	if err := browsertest.Within(ctx, step, chromedp.WaitVisible(chromedp.CSS(`[data-instance="i-e0917aa3"]`))); err != nil {
		t.Fatal(err)
	}
	browsertest.Shot(t, ctx, "fleet", false)

	// The dialog, answered on the card.
	if err := browsertest.Within(ctx, step, chromedp.Click(chromedp.CSS(`[data-instance="i-a41d5e93"] [data-ui="ui-12"] button.primary`))); err != nil {
		t.Fatal(err)
	}
	if _, err := browsertest.Until[bool](ctx, step, `[...document.querySelectorAll('.toast')].some(t => t.textContent === 'answered')`); err != nil {
		t.Fatal(err)
	}
	// The budget: spend against it.
	spent, err := browsertest.Eval[string](ctx, step, `document.querySelector('[data-instance="i-3f9a21c0"] .facts').textContent`)
	if err != nil || !strings.Contains(spent, "$0.4182 of $2.00 a run") || !strings.Contains(spent, "7 of 30 this run") {
		t.Errorf("card facts %q (%v), want cost and turns against the budget", spent, err)
	}
	for _, want := range []string{"buildbox", "/src/api", "default", "anthropic/claude-sonnet-4"} {
		if !strings.Contains(spent, want) {
			t.Errorf("card facts %q lack %q (agent, cwd, bundle, model)", spent, want)
		}
	}
	doing, err := browsertest.Eval[string](ctx, step, `document.querySelector('[data-instance="i-3f9a21c0"] .activity').textContent`)
	if err != nil || !strings.HasPrefix(doing, "doing bash") {
		t.Errorf("card activity %q (%v), want what the worker is doing", doing, err)
	}
	// Abort on the running worker's card, steer from its page.
	if err := browsertest.Within(ctx, step, chromedp.Click(chromedp.CSS(`[data-instance="i-3f9a21c0"] .card-actions button:nth-child(2)`))); err != nil {
		t.Fatal(err)
	}
	if _, err := browsertest.Until[bool](ctx, step, `[...document.querySelectorAll('.toast')].some(t => t.textContent === 'abort sent')`); err != nil {
		t.Fatal(err)
	}
	if err := browsertest.Within(ctx, step, chromedp.Evaluate[chromedp.Void](`location.hash = '#/worker/i-3f9a21c0'`),
		chromedp.WaitVisible(chromedp.CSS("#w-text")),
		chromedp.SendKeys(chromedp.CSS("#w-text"), "also run the race detector"),
		chromedp.Click(chromedp.CSS("#w-steer"))); err != nil {
		t.Fatal(err)
	}
	if _, err := browsertest.Until[bool](ctx, step, `[...document.querySelectorAll('.toast')].some(t => t.textContent === 'steering message queued')`); err != nil {
		t.Fatal(err)
	}
	// The buttons follow the machine's trust policy: mac-mini is allow,
	// which lets the page stop its workers but not abort, prompt or steer
	// them (the server's rule).
	if err := browsertest.Within(ctx, step, chromedp.Evaluate[chromedp.Void](`location.hash = '#/workers'`),
		chromedp.WaitVisible(chromedp.CSS(`[data-instance="i-d5510b4e"]`))); err != nil {
		t.Fatal(err)
	}
	disabled, err := browsertest.Eval[[]bool](ctx, step, `[...document.querySelectorAll('[data-instance="i-d5510b4e"] .card-actions button')].slice(1).map((b) => b.disabled)`)
	if err != nil || !slices.Equal(disabled, []bool{true, false}) {
		t.Errorf("an allow machine's card: abort, stop disabled = %v (%v), want abort disabled, stop enabled", disabled, err)
	}
	if err := browsertest.Within(ctx, step, chromedp.Evaluate[chromedp.Void](`location.hash = '#/worker/i-d5510b4e'`),
		chromedp.WaitVisible(chromedp.CSS("#w-text"))); err != nil {
		t.Fatal(err)
	}
	disabled, err = browsertest.Eval[[]bool](ctx, step, `["w-send", "w-steer", "w-abort", "w-stop"].map((id) => document.getElementById(id).disabled)`)
	if err != nil || !slices.Equal(disabled, []bool{true, true, true, false}) {
		t.Errorf("an allow machine's worker page: send, steer, abort, stop disabled = %v (%v), want only stop enabled", disabled, err)
	}
	if hint, err := browsertest.Eval[string](ctx, step, `document.getElementById('w-policy-hint').textContent`); err != nil || !strings.Contains(hint, "stop") || strings.Contains(hint, "or stop") {
		t.Errorf("policy hint %q (%v), want it to say the page may stop but not prompt or steer", hint, err)
	}

	if err := browsertest.Within(ctx, step, chromedp.Evaluate[chromedp.Void](`location.hash = '#/agents'`),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-agent="old-laptop"].lost`)),
		chromedp.Click(chromedp.CSS("#check-caches"))); err != nil {
		t.Fatal(err)
	}
	if _, err := browsertest.Until[bool](ctx, step, `document.querySelector('tr[data-agent="buildbox"]').textContent.includes('damaged')`); err != nil {
		t.Fatal(err)
	}
	lost, err := browsertest.Eval[string](ctx, step, `document.querySelector('tr[data-agent="old-laptop"]').textContent`)
	if err != nil || !strings.Contains(lost, "lost") || !strings.Contains(lost, "heartbeat expired") {
		t.Errorf("lost agent row %q (%v)", lost, err)
	}
	mac, err := browsertest.Eval[string](ctx, step, `document.querySelector('tr[data-agent="mac-mini"]').textContent`)
	if err != nil || !strings.Contains(mac, "established") || !strings.Contains(mac, "darwin-arm64") || !strings.Contains(mac, "allow") {
		t.Errorf("agent row %q (%v), want its state, platform and trust policy", mac, err)
	}
	// Capacity: buildbox runs two of its four workers; gpu-1 sets no limit.
	for agent, want := range map[string]string{"buildbox": "2 / 4", "gpu-1": "2"} {
		got, err := browsertest.Eval[string](ctx, step, `document.querySelector('tr[data-agent="`+agent+`"] td.workers').textContent`)
		if err != nil || got != want {
			t.Errorf("workers of %s %q (%v), want %q", agent, got, err, want)
		}
	}
	browsertest.Shot(t, ctx, "agents", false)

	if err := browsertest.Within(ctx, step, chromedp.Evaluate[chromedp.Void](`location.hash = '#/review'`),
		chromedp.WaitVisible(chromedp.CSS(`article.review[data-task="t-405"] .diff`)),
		chromedp.WaitVisible(chromedp.CSS(`article.review[data-task="t-ui"]`))); err != nil {
		t.Fatal(err)
	}
	browsertest.Shot(t, ctx, "review", false)
	// Accept the isolated task, merging its branch.
	if err := browsertest.Within(ctx, step,
		chromedp.SetValue(chromedp.CSS(`article.review[data-task="t-405"] select.deliver`), "merge"),
		chromedp.Evaluate[chromedp.Void](`document.querySelector('article.review[data-task="t-405"] select.deliver').dispatchEvent(new Event('change'))`),
		chromedp.SendKeys(chromedp.CSS(`article.review[data-task="t-405"] input.target`), "main"),
		chromedp.Click(chromedp.CSS(`article.review[data-task="t-405"] button.accept`))); err != nil {
		t.Fatal(err)
	}
	if _, err := browsertest.Until[bool](ctx, step, `[...document.querySelectorAll('.toast')].some(t => t.textContent === 't-405 accepted')`); err != nil {
		t.Fatal(err)
	}

	// Sessions: the list, a search (its snippet shown as text), a resume.
	if err := browsertest.Within(ctx, step, chromedp.Evaluate[chromedp.Void](`location.hash = '#/sessions'`),
		chromedp.WaitVisible(chromedp.CSS(`#sessions tr button`)),
		chromedp.SendKeys(chromedp.CSS("#search-q"), "retry"),
		chromedp.Click(chromedp.CSS(`#search-form button[type="submit"]`))); err != nil {
		t.Fatal(err)
	}
	snip, err := browsertest.Until[string](ctx, step, `document.querySelector('#hits .hit .snip')?.textContent`)
	if err != nil || snip != "…the <b>retry</b> loop backs off…" {
		t.Errorf("search snippet %q (%v)", snip, err)
	}
	if err := browsertest.Within(ctx, step, chromedp.Click(chromedp.CSS(`#hits .hit button`))); err != nil {
		t.Fatal(err)
	}
	if _, err := browsertest.Until[bool](ctx, step, `location.hash === '#/worker/i-3f9a21c0'`); err != nil {
		t.Fatalf("resume did not open the worker: %v", err)
	}
	// A baseline, and an isolated spawn with a model.
	if err := browsertest.Within(ctx, step,
		chromedp.Evaluate[chromedp.Void](`location.hash = '#/sessions'`),
		chromedp.Click(chromedp.CSS("#baseline-open")),
		chromedp.WaitVisible(chromedp.CSS("#bl-cwd")),
		chromedp.SendKeys(chromedp.CSS("#bl-cwd"), "/src/api"),
		chromedp.SendKeys(chromedp.CSS("#bl-repo"), "api"),
		chromedp.Click(chromedp.CSS("#bl-go"))); err != nil {
		t.Fatal(err)
	}
	if _, err := browsertest.Until[bool](ctx, step, `[...document.querySelectorAll('.toast')].some(t => t.textContent === 'baseline:api is ready')`); err != nil {
		t.Fatal(err)
	}
	if err := browsertest.Within(ctx, step,
		chromedp.Click(chromedp.CSS("#spawn-open")),
		chromedp.WaitVisible(chromedp.CSS("#sp-cwd")),
		chromedp.SetValue(chromedp.CSS("#sp-agent"), "gpu-1"),
		chromedp.SendKeys(chromedp.CSS("#sp-cwd"), "/src/trainer"),
		chromedp.SetValue(chromedp.CSS("#sp-bundle"), "ml"),
		chromedp.SendKeys(chromedp.CSS("#sp-model"), "openai/gpt-5"),
		chromedp.Click(chromedp.CSS("#sp-isolate")),
		chromedp.Click(chromedp.CSS("#sp-go"))); err != nil {
		t.Fatal(err)
	}
	if _, err := browsertest.Until[bool](ctx, step, `[...document.querySelectorAll('.toast')].some(t => t.textContent === 'i-c88e0f27 is ready')`); err != nil {
		t.Fatal(err)
	}
	want := []string{"ui ui-12 true", "abort i-3f9a21c0", `steer i-3f9a21c0 "also run the race detector"`, "task diff t-405",
		"deliver t-405 merge main", "accept t-405 keep_idle", `search "retry"`,
		"resume /home/ana/.pi/agent/sessions/--src-api--/base.jsonl box-0 clone", "baseline buildbox /src/api default api",
		`spawn {"agent":"gpu-1","cwd":"/src/trainer","bundle":"ml","model":{"provider":"openai","id":"gpt-5"},"isolation":{}}`}
	if got := b.Calls(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("backend calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Log out: the page becomes the login, and the API refuses the old
	// cookie.
	if err := browsertest.Within(ctx, step, chromedp.Click(chromedp.CSS("#logout")), chromedp.WaitVisible(chromedp.CSS("form.token-form"))); err != nil {
		t.Fatal(err)
	}
	code, err := browsertest.Eval[int](ctx, step, `fetch('/v1/status').then(r => r.status)`)
	if err != nil || code != 401 {
		t.Errorf("status after logout: %d (%v), want 401", code, err)
	}
}
