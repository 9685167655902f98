package webui

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/chromedp/chromedp"

	"example.com/pifleet/fleet/controlapi"
	"example.com/pifleet/fleet/controlapi/internal/answertest"
	"example.com/pifleet/fleet/internal/streamdelta"
	"example.com/pifleet/internal/browsertest"
)

// lineEvent is a worker event as the fleet holds it: the watch sends the
// page (which asks for deltas) each update after the first as a delta.
type lineEvent struct{ l *streamdelta.Line }

func (e lineEvent) Raw() json.RawMessage { return e.l.Bytes() }

func (e lineEvent) DeltaAfter(prev controlapi.WorkerEvent) (json.RawMessage, bool) {
	if p, ok := prev.(lineEvent); ok {
		return e.l.DeltaAfter(p.l)
	}
	return nil, false
}

// A streamed answer reaches the page as deltas: the open transcript shows
// it growing, as text appended to one text node, markup included as
// text; at its end the whole message replaces it.
func TestStreamedAnswerIsShownAsText(t *testing.T) {
	b := newFakeFleet()
	b.status = controlapi.Status{
		Agents:    []controlapi.Agent{{Name: "box", State: "established", Policy: "steer", Platform: "linux-x64"}},
		Instances: []controlapi.Instance{{ID: "i-1", Agent: "box", Cwd: "/src/app", State: "running", Bundle: "default"}},
	}
	p := servePage(t, b)
	ctx := browsertest.New(t, browsertest.Options{})
	p.login(t, ctx)
	if err := browsertest.Within(ctx, step,
		chromedp.Navigate(p.URL+"/#/worker/i-1"),
		chromedp.WaitVisible(chromedp.CSS(`#w-transcript li.info`)), // loaded: nothing yet
	); err != nil {
		t.Fatal(err)
	}
	text := hostile + " and \"quotes\" \\ é🚀\n" + strings.Repeat(hostile, 5) + answertest.Text(1000)
	events := answertest.Answer("i-1", text, 16)
	publish := func(evs []answertest.Event) {
		for _, ev := range evs {
			if !b.publish(controlapi.Change{Kind: controlapi.ChangeEvent, InstanceID: "i-1", Agent: "box", Event: ev.Type, Worker: lineEvent{ev.Line}}) {
				t.Fatal("the page's watch fell behind")
			}
		}
	}
	last := len(events) - 1 // message_end
	publish(events[:last])
	type shown struct {
		Text  string `json:"text"`
		Nodes int    `json:"nodes"`
	}
	got, err := browsertest.Until[shown](ctx, step, `(() => {
		const t = document.querySelector('#w-transcript li.streaming .text');
		return t && t.textContent.length >= `+jsLen(text)+` && {text: t.textContent, nodes: t.childNodes.length};
	})()`)
	if err != nil {
		t.Fatalf("the streamed answer is not shown: %v", err)
	}
	if got.Text != text || got.Nodes != 1 {
		t.Errorf("streaming shows %d nodes with\n%q\nwant one text node with\n%q", got.Nodes, got.Text, text)
	}
	publish(events[last:])
	final, err := browsertest.Until[string](ctx, step, `(() => {
		const li = [...document.querySelectorAll('#w-transcript li.assistant:not(.streaming) .text')];
		return !document.querySelector('#w-transcript li.streaming') && li.length === 1 && li[0].textContent;
	})()`)
	if err != nil || final != text {
		t.Errorf("the finished answer is shown as %q (%v)", final, err)
	}
	type verdict struct {
		Pwned   any `json:"pwned"`
		Images  int `json:"images"`
		Scripts int `json:"scripts"`
	}
	v, err := browsertest.Eval[verdict](ctx, step,
		`({pwned: window.__pwned ?? null, images: document.querySelectorAll('main img').length, scripts: document.querySelectorAll('main script').length})`)
	if err != nil || v.Pwned != nil || v.Images != 0 || v.Scripts != 0 {
		t.Errorf("streamed worker output became markup: %+v %v", v, err)
	}
}

// jsLen is the length of s as JavaScript counts it (UTF-16 units).
func jsLen(s string) string { return strconv.Itoa(len(utf16.Encode([]rune(s)))) }
