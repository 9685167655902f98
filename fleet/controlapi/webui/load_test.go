package webui

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"example.com/pifleet/fleet/controlapi"
	"example.com/pifleet/internal/browsertest"
)

// bigFleet is 200 instances on 4 agents, every tenth awaiting review.
func bigFleet(n int) controlapi.Status {
	st := controlapi.Status{}
	for a := range 4 {
		st.Agents = append(st.Agents, controlapi.Agent{Name: fmt.Sprintf("box-%d", a), State: "established", Policy: "steer", Platform: "linux-x64"})
	}
	for i := range n {
		in := controlapi.Instance{ID: fmt.Sprintf("i-%04d", i), Agent: fmt.Sprintf("box-%d", i%4), Cwd: fmt.Sprintf("/src/repo-%d", i%17),
			State: "idle", Bundle: "default", Model: &controlapi.ModelRef{Provider: "anthropic", ID: "claude-sonnet"}}
		if i%10 == 0 {
			in.State, in.OpenTask = "awaiting_review", fmt.Sprintf("t-%04d", i)
			st.Tasks = append(st.Tasks, controlapi.Task{ID: in.OpenTask, InstanceID: in.ID, Agent: in.Agent, State: "awaiting_review",
				Prompt: "make the tests pass", MaxRejects: 3, LastDone: &controlapi.TaskDone{Status: "settled", LastAssistantMessage: "done"}})
		}
		st.Instances = append(st.Instances, in)
	}
	return st
}

// loadFigures is what the page measured of itself while it was fed.
type loadFigures struct {
	Frames     int     `json:"frames"`
	MaxGapMs   float64 `json:"maxGapMs"`
	P95GapMs   float64 `json:"p95GapMs"`
	LongTasks  int     `json:"longTasks"`
	LongTaskMs float64 `json:"longTaskMs"`
	// IdleFrames is how many frames the page drew in the second before
	// the load.
	IdleFrames int `json:"-"`
}

// feed sends rate changes per second for d to the page: worker events of
// random instances (mostly streaming text), and one in ten a state move
// (running ↔ idle) that the status then confirms. It returns how many it
// sent; the loop is bounded by d.
func feed(t testing.TB, b *fakeFleet, n, rate int, d time.Duration) int {
	t.Helper()
	const tick = 10 * time.Millisecond
	perTick := rate * int(tick) / int(time.Second)
	tk := time.NewTicker(tick)
	defer tk.Stop()
	sent := 0
	for end := time.Now().Add(d); time.Now().Before(end); {
		<-tk.C
		for range perTick {
			id := fmt.Sprintf("i-%04d", (sent*7919)%n)
			c := controlapi.Change{Kind: controlapi.ChangeEvent, InstanceID: id, Agent: "box-0", Event: "message_update",
				Data: []byte(`{"type":"message_update","assistantMessageEvent":{"type":"text_delta","delta":"token "}}`)}
			if sent%10 == 0 {
				from, to := "idle", "running"
				b.setStatus(func(st *controlapi.Status) {
					for i := range st.Instances {
						if st.Instances[i].ID == id && st.Instances[i].State != "awaiting_review" {
							if st.Instances[i].State == "running" {
								from, to = "running", "idle"
							}
							st.Instances[i].State = to
						}
					}
				})
				c = controlapi.Change{Kind: controlapi.ChangeInstanceState, InstanceID: id, Agent: "box-0", From: from, To: to, Event: "promptDelivered"}
			}
			if !b.publish(c) {
				t.Fatalf("the page's watch fell %d changes behind after %d", 4096, sent)
			}
			sent++
		}
	}
	return sent
}

// loadBrowser is what measuring the page needs of a browser logged in to
// it: Chromium (chromedp) or Firefox (WebDriver BiDi).
type loadBrowser interface {
	// eval decodes the value of a JavaScript expression into out.
	eval(expr string, out any) error
	// until waits, at most d, until the expression is truthy.
	until(d time.Duration, expr string) error
}

type chromiumPage struct{ ctx context.Context }

func (c chromiumPage) eval(expr string, out any) error {
	v, err := browsertest.Eval[json.RawMessage](c.ctx, step, expr)
	if err != nil {
		return err
	}
	return json.Unmarshal(v, out)
}

func (c chromiumPage) until(d time.Duration, expr string) error {
	_, err := browsertest.Until[bool](c.ctx, d, "!!("+expr+")")
	return err
}

type firefoxPage struct{ f *browsertest.Firefox }

func (p firefoxPage) eval(expr string, out any) error { return p.f.Eval(step, expr, out) }

func (p firefoxPage) until(d time.Duration, expr string) error { return p.f.Until(d, expr, nil) }

// measureLoad opens the page on 200 workers in Chromium, feeds it 1,000
// changes a second for d, and returns the page's own frame figures and
// how long a last state change took to show once the feed stopped.
func measureLoad(t testing.TB, d time.Duration) (fig loadFigures, lag time.Duration, sent int) {
	b, p := loadedFleet(t)
	ctx := browsertest.New(t, browsertest.Options{})
	p.login(t, ctx)
	return measureLoadIn(t, chromiumPage{ctx}, b, d)
}

const loadWorkers, loadRate = 200, 1000

// loadedFleet serves the page over the big fleet.
func loadedFleet(t testing.TB) (*fakeFleet, page) {
	b := newFakeFleet()
	b.status = bigFleet(loadWorkers)
	return b, servePage(t, b)
}

// measureLoadIn is measureLoad in a browser logged in to b's page.
func measureLoadIn(t testing.TB, br loadBrowser, b *fakeFleet, d time.Duration) (fig loadFigures, lag time.Duration, sent int) {
	if err := br.until(step, `document.querySelector('[data-instance="i-0199"]')`); err != nil {
		t.Fatal(err)
	}
	// Frame gaps (requestAnimationFrame) and long tasks (where the
	// browser reports them; Firefox does not), measured by the page
	// itself.
	var ok bool
	if err := br.eval(`(() => {
		window.__load = {gaps: [], long: 0, longMs: 0, last: performance.now(), on: true};
		const L = window.__load;
		const frame = (now) => { if (!L.on) return; L.gaps.push(now - L.last); L.last = now; requestAnimationFrame(frame); };
		requestAnimationFrame(frame);
		if ((PerformanceObserver.supportedEntryTypes || []).includes('longtask'))
			new PerformanceObserver((list) => { for (const e of list.getEntries()) { L.long++; L.longMs += e.duration; } }).observe({entryTypes: ['longtask']});
		return true })()`, &ok); err != nil {
		t.Fatal(err)
	}
	// A second without load first: the machine's own frame rate, which
	// the test compares the loaded one with.
	var idle int
	if err := br.eval(`new Promise((done) => {
		const L = window.__load, start = L.gaps.length;
		setTimeout(() => { done(L.gaps.length - start); L.gaps = []; L.long = 0; L.longMs = 0; }, 1000) })`, &idle); err != nil {
		t.Fatal(err)
	}
	sent = feed(t, b, loadWorkers, loadRate, d)
	// The last word: i-0001 escalated; how long until its card says so.
	b.setStatus(func(st *controlapi.Status) { st.Instances[1].State = "escalated" })
	start := time.Now()
	b.publish(controlapi.Change{Kind: controlapi.ChangeInstanceState, InstanceID: "i-0001", From: "idle", To: "escalated"})
	if err := br.until(10*time.Second, `document.querySelector('[data-instance="i-0001"] .state')?.textContent === 'escalated'`); err != nil {
		t.Fatalf("the last change never showed: %v", err)
	}
	lag = time.Since(start)
	if err := br.eval(`(() => {
		const L = window.__load; L.on = false;
		const g = L.gaps.slice(1).sort((a, b) => a - b);
		return {frames: g.length, maxGapMs: g[g.length - 1] || 0, p95GapMs: g[Math.floor(g.length * 0.95)] || 0, longTasks: L.long, longTaskMs: L.longMs} })()`, &fig); err != nil {
		t.Fatal(err)
	}
	fig.IdleFrames = idle
	return fig, lag, sent
}

// TestPageKeepsUpWithABigFleet: 200 workers, 1,000 changes a second for
// three seconds; the page stays live, renders frames throughout and shows
// the last change.
func TestPageKeepsUpWithABigFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("load")
	}
	fig, lag, sent := measureLoad(t, 3*time.Second)
	checkKeptUp(t, fig, lag, sent)
}

// TestPageKeepsUpWithABigFleetInFirefox is the same load in Firefox.
func TestPageKeepsUpWithABigFleetInFirefox(t *testing.T) {
	if testing.Short() {
		t.Skip("load")
	}
	b, p := loadedFleet(t)
	fig, lag, sent := measureLoadIn(t, firefoxPage{firefoxLoggedIn(t, p)}, b, 3*time.Second)
	checkKeptUp(t, fig, lag, sent)
}

// checkKeptUp fails when the page stopped drawing under the feed. How
// fast it draws is a figure for the benchmarks (BenchmarkPageUnderLoad),
// not an assertion here: a loaded machine slows any page down.
func checkKeptUp(t *testing.T, fig loadFigures, lag time.Duration, sent int) {
	t.Helper()
	t.Logf("sent %d changes; page: %+v; last change shown after %v", sent, fig, lag)
	if fig.Frames == 0 {
		t.Errorf("the page drew no frame under the load (%d a second idle): it stalled", fig.IdleFrames)
	}
}

// BenchmarkPageUnderLoad reports the page's frame figures under 200
// workers and 1,000 changes a second (one iteration: 5 s of load).
func BenchmarkPageUnderLoad(b *testing.B) {
	for b.Loop() {
		fig, lag, sent := measureLoad(b, 5*time.Second)
		reportLoad(b, fig, lag, sent, 5)
	}
}

// BenchmarkPageUnderLoadInFirefox is BenchmarkPageUnderLoad in Firefox
// (which reports no long tasks).
func BenchmarkPageUnderLoadInFirefox(b *testing.B) {
	for b.Loop() {
		fleet, p := loadedFleet(b)
		f := firefoxLoggedIn(b, p)
		fig, lag, sent := measureLoadIn(b, firefoxPage{f}, fleet, 5*time.Second)
		reportLoad(b, fig, lag, sent, 5)
	}
}

func reportLoad(b *testing.B, fig loadFigures, lag time.Duration, sent int, seconds float64) {
	b.ReportMetric(float64(sent)/seconds, "changes/s")
	b.ReportMetric(fig.P95GapMs, "p95-frame-ms")
	b.ReportMetric(float64(fig.IdleFrames), "idle-fps")
	b.ReportMetric(float64(fig.Frames)/seconds, "loaded-fps")
	b.ReportMetric(fig.MaxGapMs, "max-frame-ms")
	b.ReportMetric(float64(fig.LongTasks), "long-tasks")
	b.ReportMetric(fig.LongTaskMs, "long-task-ms")
	b.ReportMetric(float64(lag.Milliseconds()), "last-change-ms")
}

// firefoxLoggedIn is a Firefox logged in to p, live; it fails the test
// on any problem the page reports.
func firefoxLoggedIn(t testing.TB, p page) *browsertest.Firefox {
	t.Helper()
	f := browsertest.NewFirefox(t, browsertest.Options{})
	f.FailOnProblems()
	if err := f.Navigate(p.Auth.NewLogin().URL); err != nil {
		t.Fatal(err)
	}
	if err := f.Until(step, `document.querySelector('#live.on')`, nil); err != nil {
		t.Fatalf("login: %v", err)
	}
	return f
}

// TestPageFitsAPhone opens every view at phone width: nothing is wider
// than the screen (wide tables scroll inside their own box).
func TestPageFitsAPhone(t *testing.T) {
	b := newFakeFleet()
	b.status = bigFleet(12)
	b.status.Agents[3].State, b.status.Agents[3].LastError = "lost", "heartbeat expired"
	p := servePage(t, b)
	ctx := browsertest.New(t, browsertest.Options{Width: 390, Height: 844})
	if err := browsertest.Within(ctx, step, chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2))); err != nil {
		t.Fatal(err)
	}
	p.login(t, ctx)
	for _, view := range []struct{ hash, ready string }{
		{"#/workers", `[data-instance="i-0011"]`},
		{"#/review", `article.review`},
		{"#/agents", `tr[data-agent="box-3"].lost`},
		{"#/worker/i-0000", `#w-facts dl`},
		{"#/sessions", `#search-q`},
	} {
		if err := browsertest.Within(ctx, step, chromedp.Navigate(p.URL+"/"+view.hash), chromedp.WaitVisible(chromedp.CSS(view.ready))); err != nil {
			t.Fatalf("%s: %v", view.hash, err)
		}
		w, err := browsertest.Eval[[]int](ctx, step, `[document.documentElement.scrollWidth, window.innerWidth]`)
		if err != nil {
			t.Fatal(err)
		}
		if w[0] > w[1] {
			t.Errorf("%s is %d px wide on a %d px screen", view.hash, w[0], w[1])
		}
		if view.hash == "#/worker/i-0000" {
			browsertest.Shot(t, ctx, "phone", true)
		}
	}
}
