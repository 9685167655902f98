//go:build unix

package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"example.com/pifleet/fleet/agent"
	"example.com/pifleet/fleet/controlapi"
	"example.com/pifleet/internal/browsertest"
	"example.com/pifleet/internal/pitest"
)

// A worker dialog nobody answers in time leaves every view at once (issue
// 19): the agent gives the scripted worker its safe default once its
// dialog wait runs out and reports the end; the watch stream carries a
// ui_ended change; the web page, open on the worker, showed the dialog and
// drops it; ui list no longer lists it, and ui answer says it ended. The
// dialog has no timeout of its own, so the server cannot reckon its end
// itself: only the agent's report ends it.
func TestADialogThatEndsUnansweredLeavesThePage(t *testing.T) {
	browsertest.Find(t)
	dir := socketDir(t)
	reg := filepath.Join(dir, "registry")
	publishDefault(t, reg, map[string]string{"bundle.json": `{"model":{"primary":{"provider":"faux","id":"faux-1"}}}`})
	const dialogWait = 6 * time.Second // long enough for the page to show it
	addr, _ := startAgentWith(t, reg, pitest.Scripted, func(c *agent.Config) { c.DialogTimeout = dialogWait })
	cmd := &ServeCmd{StateDir: filepath.Join(dir, "state"), Registry: reg, Listen: "127.0.0.1:0",
		Agent: []string{"box=" + addr}, WhoisStatic: []string{"127.0.0.1=box"}, UI: "127.0.0.1:0"}
	s, c := startServe(t, cmd)
	api := "--api=" + s.API.String()
	run := cliOK(t, api)
	run("trust", "set", "box", "steer")
	awaitAgentState(t, c, "box", "established")
	id := strings.TrimSpace(run("spawn", "--agent=box", "--cwd="+dir, "--bundle=default"))
	t.Cleanup(func() { _, _, _ = runCLI(t, "stop", id, api) })

	link := strings.TrimSpace(run("ui", "--no-open"))
	ctx := browsertest.New(t, browsertest.Options{Width: 1360, Height: 900})
	onPage := pageUntil(t, ctx)
	if err := browsertest.Within(ctx, e2eWait, chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("#live.on"))); err != nil {
		t.Fatalf("log in: %v", err)
	}
	browsertest.CatchErrors(t, ctx)
	// The worker's page, with a record of the dialogs it shows.
	if err := browsertest.Within(ctx, e2eWait,
		chromedp.Navigate(s.UI+"/#/worker/"+id),
		chromedp.WaitVisible(chromedp.CSS("#w-text"))); err != nil {
		t.Fatalf("the worker page: %v", err)
	}
	onPage("the idle worker", `document.querySelector('#w-state')?.textContent === 'idle' && 'yes'`)
	if err := browsertest.Within(ctx, e2eWait, chromedp.Evaluate[chromedp.Void](`window.__shown = [];
		new MutationObserver(() => {
			const b = document.querySelector('#w-dialogs .dialog-box');
			const v = b ? b.dataset.ui : '';
			if (window.__shown[window.__shown.length - 1] !== v) window.__shown.push(v);
		}).observe(document.getElementById('w-dialogs'), {subtree: true, childList: true})`)); err != nil {
		t.Fatal(err)
	}

	wctx, cancel := context.WithTimeout(context.Background(), 2*e2eWait) // a watch that waits in vain fails
	defer cancel()
	w, err := c.Watch(wctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	run("prompt", id, "/faux-ui")
	asked := until(t, w, "the dialog", func(ch controlapi.Change) bool {
		return ch.Kind == controlapi.ChangeUIRequest && ch.InstanceID == id
	})
	var req controlapi.UIRequest
	if err := json.Unmarshal(asked.Data, &req); err != nil || req.ID == "" || req.Deadline != nil {
		t.Fatalf("ui_request change: %v %s (want no deadline of its own)", err, asked.Data)
	}
	onPage("the dialog on the page", `window.__shown.includes(`+jsString(req.ID)+`) && 'yes'`)

	ended := until(t, w, "the dialog's end", func(ch controlapi.Change) bool {
		return ch.Kind == controlapi.ChangeUIEnded && ch.InstanceID == id
	})
	var gone controlapi.UIRequest
	if err := json.Unmarshal(ended.Data, &gone); err != nil || gone.ID != req.ID || !strings.Contains(ended.Message, "time ran out") {
		t.Errorf("ui_ended change: %v %s %q, want dialog %s whose time ran out", err, ended.Data, ended.Message, req.ID)
	}
	onPage("the dialog gone from the page", `(() => { const s = window.__shown;
		return !document.querySelector('#w-dialogs .dialog-box') && s.indexOf(`+jsString(req.ID)+`) >= 0 && s[s.length - 1] === '' && 'yes' })()`)

	if out := run("ui", "list"); strings.Contains(out, req.ID) {
		t.Errorf("ui list still lists the ended dialog:\n%s", out)
	}
	if status, _, errOut := runCLI(t, "ui", "answer", req.ID, "true", api); status == 0 || !strings.Contains(errOut, "ended without an answer") {
		t.Errorf("ui answer of the ended dialog: %d %s", status, errOut)
	}
	run("stop", id)
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
