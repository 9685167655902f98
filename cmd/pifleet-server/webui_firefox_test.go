//go:build unix

package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"example.com/pifleet/fleet/controlapi"
	"example.com/pifleet/internal/browsertest"
)

// firefoxHostile is worker output that would run script if the page
// parsed it as markup.
const firefoxHostile = `<script>window.__pwned = "script"</script><img src=x onerror="window.__pwned = 'img'"> done`

// TestWebPageInFirefox is the page in Firefox, over a real server and
// agent with the scripted worker: login by the link of pifleet-server ui;
// live updates without a reload (a worker spawned elsewhere appears and
// goes to idle, its task reaches review); hostile worker output shown as
// text; then, at phone width, every view fits the screen and a review is
// done with the mouse and the keyboard (reject with feedback, the
// revision, accept); the server refuses the page a prompt while the
// machine's policy is allow, and lets it stop the worker from its page. Firefox reports no exception, console
// error or Content-Security-Policy violation throughout.
func TestWebPageInFirefox(t *testing.T) {
	browsertest.FindFirefox(t)
	dir := socketDir(t)
	reg := filepath.Join(dir, "registry")
	publishDefault(t, reg, map[string]string{"bundle.json": `{"model":{"primary":{"provider":"faux","id":"faux-1"}},"review":{"maxRejects":3}}`})
	cmd := &ServeCmd{StateDir: filepath.Join(dir, "state"), Registry: reg, Listen: "127.0.0.1:0",
		Agent: []string{"box=" + startWorkerAgent(t, reg)}, WhoisStatic: []string{"127.0.0.1=box"}, UI: "127.0.0.1:0"}
	s, c := startServe(t, cmd)
	api := "--api=" + s.API.String()
	if status, out, errOut := runCLI(t, "trust", "set", "box", "steer", api); status != 0 {
		t.Fatalf("trust set: %d %s%s", status, out, errOut)
	}
	awaitAgentState(t, c, "box", "established")
	repo := gitRepo(t)

	f := browsertest.NewFirefox(t, browsertest.Options{Width: 1360, Height: 900})
	f.FailOnProblems()
	eval := func(what, expr string, out any) {
		t.Helper()
		if err := f.Eval(e2eWait, expr, out); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	until := func(what, expr string, out any) {
		t.Helper()
		if err := f.Until(e2eWait, expr, out); err != nil {
			t.Fatalf("waiting for %s: %v\nfirefox:\n%s", what, err, f.Output())
		}
	}
	click := func(selector string) {
		t.Helper()
		if err := f.Click(selector); err != nil {
			t.Fatal(err)
		}
	}

	// Log in with the one-time link.
	status, link, errOut := runCLI(t, "ui", "--no-open", api)
	link = strings.TrimSpace(link)
	if status != 0 || !strings.HasPrefix(link, s.UI+"/login?code=") {
		t.Fatalf("pifleet-server ui: %d %q %s", status, link, errOut)
	}
	if err := f.Navigate(link); err != nil {
		t.Fatal(err)
	}
	until("the live page", `document.querySelector('#live.on')`, nil)
	var loc string
	eval("the address", `location.href`, &loc)
	if loc != s.UI+"/" {
		t.Errorf("after the login the address is %s, want %s/", loc, s.UI)
	}
	// From here on the page is never loaded again: a reload would lose
	// this mark, and every change below must come by the watch stream.
	eval("mark the page", `(() => { window.__sameLoad = true; window.__states = [];
		new MutationObserver(() => {
			for (const b of document.querySelectorAll('#cards .card[data-instance] .state')) {
				const s = b.textContent; if (window.__states[window.__states.length - 1] !== s) window.__states.push(s);
			}}).observe(document.getElementById('cards'), {subtree: true, childList: true, characterData: true}) })()`, nil)

	// A worker spawned by another client appears and goes to idle.
	ctx := context.Background()
	sp, err := c.Spawn(ctx, controlapi.SpawnRequest{Agent: "box", Cwd: repo, Bundle: "default"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	id := sp.InstanceID
	card := `#cards .card[data-instance="` + id + `"]`
	until("the new worker idle on its card", `document.querySelector('`+card+` .state')?.textContent === 'idle'`, nil)
	// Its task, whose answer is hostile markup, reaches review.
	if _, err := c.Prompt(ctx, id, controlapi.PromptRequest{Text: "say: " + firefoxHostile, Task: true}); err != nil {
		t.Fatal(err)
	}
	until("the card awaiting review", `document.querySelector('`+card+` .state')?.textContent === 'awaiting_review'`, nil)
	var states []string
	eval("the card's states", `window.__states`, &states)
	if !inOrder(states, "idle", "awaiting_review") {
		t.Errorf("the card showed the states %v, want idle then awaiting_review", states)
	}
	until("the review count", `document.getElementById('count-review').textContent === '1'`, nil)

	// The hostile answer is text on the review and in the transcript.
	click(`#nav a[data-view="review"]`)
	var last string
	until("the review's last message", `document.querySelector('article.review .last')?.textContent`, &last)
	if last != firefoxHostile {
		t.Errorf("last message shown as %q, want the text %q", last, firefoxHostile)
	}
	click(`#nav a[data-view="workers"]`)
	click(card + ` a.card-title`)
	var transcript string
	until("the transcript", `(() => { const t = document.querySelector('#w-transcript')?.textContent || ''; return t.includes('done') && t.includes('say: ') && t })()`, &transcript)
	if strings.Count(transcript, firefoxHostile) < 2 {
		t.Errorf("the transcript shows the prompt and the answer as text %d times, want 2:\n%s", strings.Count(transcript, firefoxHostile), transcript)
	}
	type verdict struct {
		Pwned   any `json:"pwned"`
		Images  int `json:"images"`
		Scripts int `json:"scripts"`
	}
	var v verdict
	eval("markup from output", `({pwned: window.__pwned ?? null, images: document.querySelectorAll('main img').length, scripts: document.querySelectorAll('main script').length})`, &v)
	if v.Pwned != nil || v.Images != 0 || v.Scripts != 0 {
		t.Errorf("worker output became markup: %+v", v)
	}

	// At phone width every view fits the screen, and a review is done
	// with the mouse and the keyboard.
	if err := f.SetViewport(390, 844); err != nil {
		t.Fatal(err)
	}
	for _, view := range []struct{ nav, ready string }{
		{"workers", card},
		{"agents", `tr[data-agent="box"]`},
		{"sessions", `#search-q`},
		{"review", `article.review textarea.feedback`},
	} {
		click(`#nav a[data-view="` + view.nav + `"]`)
		until("the "+view.nav+" view", `document.querySelector('`+view.ready+`')?.getClientRects().length > 0`, nil)
		var w []int
		eval("widths", `[document.documentElement.scrollWidth, innerWidth]`, &w)
		if w[0] > w[1] {
			t.Errorf("%s is %d px wide on a %d px screen", view.nav, w[0], w[1])
		}
	}
	f.Shot("firefox-phone")
	task := ""
	eval("the task", `document.querySelector('article.review').dataset.task`, &task)
	review := `article.review[data-task="` + task + `"]`
	if err := f.Type(review+` textarea.feedback`, "say: revised as asked"); err != nil {
		t.Fatal(err)
	}
	click(review + ` button.reject`)
	until("the revision awaiting review", `(() => { const r = document.querySelector('`+review+`');
		return r && r.querySelector('.last').textContent === 'revised as asked' && r.textContent.includes('1/3 rejections') })()`, nil)
	click(review + ` button.accept`)
	until("the review emptied", `document.querySelector('#no-reviews:not([hidden])')`, nil)
	// Accepted, the worker waits for more.
	click(`#nav a[data-view="workers"]`)
	until("the accepted worker idle", `document.querySelector('`+card+` .state')?.textContent === 'idle'`, nil)
	// The page gets no more than the machine's trust policy: under allow
	// the server refuses its prompt, however the page sends it.
	if status, out, errOut := runCLI(t, "trust", "set", "box", "allow", api); status != 0 {
		t.Fatalf("trust set allow: %d %s%s", status, out, errOut)
	}
	var refused struct {
		Status int    `json:"status"`
		Body   string `json:"body"`
	}
	eval("a prompt under allow", `fetch('/v1/instances/`+id+`/prompt', {method: 'POST', credentials: 'same-origin', body: JSON.stringify({text: 'say: hi'}),
		headers: {'Content-Type': 'application/json', 'X-CSRF-Token': document.querySelector('meta[name="csrf-token"]').content}})
		.then(async (r) => ({status: r.status, body: await r.text()}))`, &refused)
	if refused.Status != 403 || !strings.Contains(refused.Body, "policy_refused") {
		t.Errorf("prompt from the page under allow: %d %s, want 403 policy_refused", refused.Status, refused.Body)
	}
	// Stopping a worker is allowed under allow, as starting one is: the
	// page offers it and the server does it (the confirm answered OK).
	click(card + ` a.card-title`)
	until("the worker page", `document.getElementById('w-state')?.textContent === 'idle' && !document.getElementById('w-stop').disabled`, nil)
	click(`#w-stop`)
	until("the worker stopped on its page", `document.getElementById('w-state')?.textContent === 'stopped'`, nil)

	var same bool
	eval("the mark", `window.__sameLoad === true`, &same)
	if !same {
		t.Error("the page was loaded again: its changes did not come live")
	}
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Tasks) != 1 || !strings.HasPrefix(st.Tasks[0].Verdict, "accepted") || st.Tasks[0].Rejects != 1 ||
		len(st.Tasks[0].Feedback) != 1 || st.Tasks[0].Feedback[0].Text != "say: revised as asked" {
		t.Errorf("task after the review in Firefox: %+v", st.Tasks)
	}
	for _, in := range st.Instances {
		if in.ID == id && in.State != "stopped" {
			t.Errorf("worker after Stop in Firefox: %s", in.State)
		}
	}
}
