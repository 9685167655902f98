//go:build unix

package main

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"example.com/pifleet/internal/browsertest"
	"example.com/pifleet/internal/pitest"
)

// gitRepo makes a repository with one committed file.
func gitRepo(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "app")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("the app\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "."}, {"-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "first"}} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	return dir
}

// pageUntil returns a wait, at most e2eWait, until the JavaScript
// expression is truthy on the page of ctx; it returns the expression's
// value and fails the test, naming what it waited for, when it is not.
func pageUntil(t *testing.T, ctx context.Context) func(what, expr string) string {
	return func(what, expr string) string {
		t.Helper()
		v, err := browsertest.Until[string](ctx, e2eWait, expr)
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		return v
	}
}

// TestWebPageDrivesARealPiWorker is the page end to end: a browser logs
// in with the link of pifleet-server ui, spawns a real pi worker and
// watches it go requested → provisioning → idle, sends it a tracked task,
// reviews the diff, rejects with feedback typed into the page, sees the
// revision, and accepts it with stop.
func TestWebPageDrivesARealPiWorker(t *testing.T) {
	browsertest.Find(t)
	dir := socketDir(t)
	reg := filepath.Join(dir, "registry")
	ext, err := os.ReadFile(pitest.FauxProvider(t))
	if err != nil {
		t.Fatal(err)
	}
	publishDefault(t, reg, map[string]string{
		"ext/faux-provider.ts": string(ext),
		"bundle.json":          `{"extensions":["ext/faux-provider.ts"],"model":{"primary":{"provider":"faux","id":"faux-1"}},"review":{"maxRejects":3}}`,
	})
	cmd := &ServeCmd{StateDir: filepath.Join(dir, "state"), Registry: reg, Listen: "127.0.0.1:0",
		Agent: []string{"box=" + startAgentOfKind(t, reg, pitest.RealPi)}, WhoisStatic: []string{"127.0.0.1=box"}, UI: "127.0.0.1:0"}
	s, c := startServe(t, cmd)
	if s.UI == "" {
		t.Fatal("serve --ui reported no page URL")
	}
	api := "--api=" + s.API.String()
	if status, out, errOut := runCLI(t, "trust", "set", "box", "steer", api); status != 0 {
		t.Fatalf("trust set: %d %s%s", status, out, errOut)
	}
	awaitAgentState(t, c, "box", "established")
	repo := gitRepo(t)

	// Without a session the API refuses; the page is the login.
	resp, err := http.Get(s.UI + "/v1/status")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /v1/status without a cookie: %d, want 401", resp.StatusCode)
	}

	status, link, errOut := runCLI(t, "ui", "--no-open", api)
	link = strings.TrimSpace(link)
	if status != 0 || !strings.HasPrefix(link, s.UI+"/login?code=") || !strings.Contains(errOut, "once") {
		t.Fatalf("pifleet-server ui: %d %q %s", status, link, errOut)
	}
	ctx := browsertest.New(t, browsertest.Options{Width: 1360, Height: 900})
	run := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := browsertest.Within(ctx, e2eWait, steps...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	until := pageUntil(t, ctx)
	run("log in", chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("#live.on")))
	browsertest.CatchErrors(t, ctx)
	if loc, _ := browsertest.Eval[string](ctx, e2eWait, "location.href"); strings.Contains(loc, "code=") {
		t.Errorf("the login code stays in the address bar: %s", loc)
	}

	// The page refuses its own changes without the CSRF token.
	code, err := browsertest.Eval[int](ctx, e2eWait,
		`fetch('/v1/instances', {method: 'POST', body: '{}', headers: {'Content-Type': 'application/json'}}).then(r => r.status)`)
	if err != nil || code != http.StatusForbidden {
		t.Errorf("POST without the CSRF token from the page: %d (%v), want 403", code, err)
	}

	// Spawn from the page; record every state the new worker's card shows.
	run("open the spawn dialog",
		chromedp.Evaluate[chromedp.Void](`window.__states = []; new MutationObserver(() => {
			for (const b of document.querySelectorAll('#cards .card .state')) {
				const s = b.textContent; if (window.__states[window.__states.length - 1] !== s) window.__states.push(s);
			}}).observe(document.getElementById('cards'), {subtree: true, childList: true, characterData: true})`),
		chromedp.Click(chromedp.CSS("#spawn-open")),
		chromedp.WaitVisible(chromedp.CSS("#spawn-dialog #sp-cwd")),
		chromedp.SetValue(chromedp.CSS("#sp-cwd"), repo),
		chromedp.Click(chromedp.CSS("#sp-go")))
	id := until("the spawned worker's card", `(() => { const c = document.querySelector('#cards .card[data-instance]'); return c && c.querySelector('.state').textContent === 'idle' && c.dataset.instance })()`)
	seen, err := browsertest.Eval[[]string](ctx, e2eWait, "window.__states")
	if err != nil {
		t.Fatal(err)
	}
	if !inOrder(seen, "requested", "provisioning", "idle") {
		t.Errorf("the card showed the states %v, want requested, provisioning and idle in that order", seen)
	}
	// Once the spawn has answered (its pending card gone): until then the
	// card may show only what the watch stream saw.
	history := until("the card's history", `!document.querySelector('#cards .card.pending') && document.querySelector('#cards .card[data-instance] .history')?.textContent`)
	if !inOrder(strings.Split(history, " → "), "requested", "provisioning", "idle") {
		t.Errorf("card history %q", history)
	}
	browsertest.Shot(t, ctx, "workers", false)

	// A tracked task typed into the worker's page.
	run("send a task",
		chromedp.Navigate(s.UI+"/#/worker/"+id),
		chromedp.WaitVisible(chromedp.CSS("#w-text")),
		chromedp.SendKeys(chromedp.CSS("#w-text"), "write: README.md changed by the worker"),
		chromedp.Click(chromedp.CSS("#w-task")),
		chromedp.Click(chromedp.CSS("#w-send")))
	until("the task's end on the worker page", `document.querySelector('#w-state')?.textContent === 'awaiting_review' && 'yes'`)
	until("the tool call in the transcript", `document.querySelector('#w-transcript li.tool .tool-name')?.textContent === 'write' && 'yes'`)
	run("open the diagram", chromedp.Click(chromedp.CSS("#w-diagram-box summary")),
		chromedp.WaitVisible(chromedp.CSS(`#w-diagram svg .st.current[data-state="awaiting_review"]`)))
	browsertest.Shot(t, ctx, "worker", false)

	// Review: the diff, then a rejection typed into the page.
	run("open the review", chromedp.Click(chromedp.CSS(`#nav a[data-view="review"]`)))
	task := until("the review card", `document.querySelector('article.review')?.dataset.task`)
	diff := until("the diff", `(() => { const d = document.querySelector('article.review .diff'); return d && d.textContent.includes('changed by the worker') && d.textContent })()`)
	if !strings.Contains(diff, "-the app") {
		t.Errorf("diff %q lacks the removed line", diff)
	}
	browsertest.Shot(t, ctx, "review", false)
	run("reject with feedback",
		chromedp.SendKeys(chromedp.CSS(`article.review[data-task="`+task+`"] textarea.feedback`), "say: revised as asked"),
		chromedp.Click(chromedp.CSS(`article.review[data-task="`+task+`"] button.reject`)))
	until("the revision awaiting review", `(() => { const r = document.querySelector('article.review[data-task="`+task+`"]');
		return r && r.querySelector('.last').textContent === 'revised as asked' && r.textContent.includes('1/3 rejections') && 'yes' })()`)

	// Accept with stop.
	run("accept with stop",
		chromedp.SetValue(chromedp.CSS(`article.review[data-task="`+task+`"] select.disposition`), "stop"),
		chromedp.Click(chromedp.CSS(`article.review[data-task="`+task+`"] button.accept`)))
	until("the review emptied", `document.querySelector('#no-reviews:not([hidden])') && 'yes'`)
	run("the worker page", chromedp.Navigate(s.UI+"/#/worker/"+id))
	until("the worker stopped", `document.querySelector('#w-state')?.textContent === 'stopped' && 'yes'`)

	st, err := c.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Tasks) != 1 || !strings.HasPrefix(st.Tasks[0].Verdict, "accepted") || st.Tasks[0].Rejects != 1 ||
		len(st.Tasks[0].Feedback) != 1 || st.Tasks[0].Feedback[0].Text != "say: revised as asked" {
		t.Errorf("task after the page's review: %+v", st.Tasks)
	}
	for _, in := range st.Instances {
		if in.ID == id && in.State != "stopped" {
			t.Errorf("worker after accept with stop: %s", in.State)
		}
	}
	run("agents", chromedp.Navigate(s.UI+"/#/agents"), chromedp.WaitVisible(chromedp.CSS(`tr[data-agent="box"]`)))
	browsertest.Shot(t, ctx, "agents", false)
}

// inOrder reports whether want appear in got in that order (others may
// come between).
func inOrder(got []string, want ...string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && strings.TrimSpace(g) == want[i] {
			i++
		}
	}
	return i == len(want)
}
