package webui

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"example.com/pifleet/fleet/controlapi"
	"example.com/pifleet/internal/browsertest"
)

// TestTranscriptShowsErrorsThinkingAndOlderEntries: a worker's page
// renders the model's error and a failed tool call as errors, keeps the
// thinking folded, and loads the entries older than its first answer
// holds on request.
func TestTranscriptShowsErrorsThinkingAndOlderEntries(t *testing.T) {
	b := newFakeFleet()
	b.status = controlapi.Status{
		Agents:    []controlapi.Agent{{Name: "box", State: "established", Policy: "steer", Platform: "linux-x64"}},
		Instances: []controlapi.Instance{{ID: "i-1", Agent: "box", Cwd: "/src/app", State: "idle", Bundle: "default"}},
	}
	// More entries than the page asks for at first (200): the oldest
	// comes only with "Load earlier entries".
	entries := []json.RawMessage{entry("e0", `{"role":"user","content":[{"type":"text","text":"the very first prompt"}],"timestamp":1}`)}
	for i := 1; i < 240; i++ {
		entries = append(entries, entry(fmt.Sprintf("e%d", i), fmt.Sprintf(`{"role":"user","content":[{"type":"text","text":"prompt %d"}],"timestamp":%d}`, i, i+1)))
	}
	entries = append(entries,
		entry("t1", `{"role":"assistant","content":[{"type":"thinking","thinking":"weighing the retry loop"},{"type":"toolCall","id":"c1","name":"bash","arguments":{"command":"go test ./..."}}],"timestamp":300}`),
		entry("t2", `{"role":"toolResult","toolCallId":"c1","toolName":"bash","content":[{"type":"text","text":"FAIL example.com/app 0.2s"}],"isError":true,"timestamp":301}`),
		entry("t3", `{"role":"assistant","content":[],"stopReason":"error","errorMessage":"overloaded_error: 529","timestamp":302}`))
	b.transcript["i-1"] = controlapi.Transcript{Entries: entries}
	p := servePage(t, b)
	ctx := browsertest.New(t, browsertest.Options{})
	p.login(t, ctx)
	if err := browsertest.Within(ctx, step,
		chromedp.Navigate(p.URL+"/#/worker/i-1"),
		chromedp.WaitVisible(chromedp.CSS(`#w-transcript li.error`)),
	); err != nil {
		t.Fatal(err)
	}
	type shown struct {
		Error, Failed, FailedSummary string
		ThinkingOpen                 bool
		Thinking                     string
		First, OlderButton           bool
	}
	look := func() shown {
		t.Helper()
		v, err := browsertest.Eval[shown](ctx, step, `(() => {
			const tr = document.getElementById('w-transcript');
			const think = [...tr.querySelectorAll('li.assistant details')].find((d) => d.querySelector('summary').textContent === 'thinking');
			const failed = tr.querySelector('li.tool.failed');
			return {Error: tr.querySelector('li.error')?.textContent || '', Failed: failed?.textContent || '',
				FailedSummary: failed?.querySelector('.result summary')?.textContent || '',
				ThinkingOpen: !!think?.open, Thinking: think?.textContent || '',
				First: tr.textContent.includes('the very first prompt'), OlderButton: !document.getElementById('w-older').hidden} })()`)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	v := look()
	if !strings.Contains(v.Error, "overloaded_error: 529") {
		t.Errorf("the model's error shown as %q", v.Error)
	}
	if !strings.Contains(v.Failed, "go test ./...") || !strings.Contains(v.Failed, "FAIL example.com/app") || v.FailedSummary != "failed" {
		t.Errorf("the failed tool call shown as %q (summary %q)", v.Failed, v.FailedSummary)
	}
	if v.ThinkingOpen || !strings.Contains(v.Thinking, "weighing the retry loop") {
		t.Errorf("thinking %q, open %v: want it there and folded", v.Thinking, v.ThinkingOpen)
	}
	if v.First || !v.OlderButton {
		t.Errorf("first answer: the oldest entry shown %v, the button for earlier entries shown %v; want false, true", v.First, v.OlderButton)
	}
	if err := browsertest.Within(ctx, step, chromedp.Click(chromedp.CSS("#w-older"))); err != nil {
		t.Fatal(err)
	}
	if _, err := browsertest.Until[bool](ctx, step, `document.getElementById('w-transcript').textContent.includes('the very first prompt')`); err != nil {
		t.Fatalf("the earlier entries never came: %v", err)
	}
	if v = look(); v.OlderButton || !strings.Contains(v.Error, "overloaded_error") {
		t.Errorf("after loading the earlier entries: %+v", v)
	}
}

// TestPageTakesAStatusWithoutLists: a Backend that leaves a list of its
// Status nil (JSON null) gets a working page, not one that never goes
// live.
func TestPageTakesAStatusWithoutLists(t *testing.T) {
	b := newFakeFleet()
	b.status = controlapi.Status{Agents: []controlapi.Agent{{Name: "box", State: "established", Policy: "steer", Platform: "linux-x64"}}}
	p := servePage(t, b)
	ctx := browsertest.New(t, browsertest.Options{})
	p.login(t, ctx)
	if err := browsertest.Within(ctx, step, chromedp.WaitVisible(chromedp.CSS("#no-workers"))); err != nil {
		t.Fatalf("the empty fleet's page: %v", err)
	}
	b.setStatus(func(st *controlapi.Status) {
		st.Instances = []controlapi.Instance{{ID: "i-1", Agent: "box", Cwd: "/src/app", State: "idle", Bundle: "default"}}
	})
	b.publish(controlapi.Change{Kind: controlapi.ChangeInstanceState, InstanceID: "i-1", Agent: "box", From: "provisioning", To: "idle"})
	if _, err := browsertest.Until[bool](ctx, step, `document.querySelector('[data-instance="i-1"] .state')?.textContent === 'idle'`); err != nil {
		t.Fatalf("a worker of a fleet without tasks: %v", err)
	}
}
