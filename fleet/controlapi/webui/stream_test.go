package webui

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode/utf16"

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
// text; at its end the whole message replaces it. In Chromium and in
// Firefox.
func TestStreamedAnswerIsShownAsText(t *testing.T) {
	b := streamingFleet()
	p := servePage(t, b)
	ctx := browsertest.New(t, browsertest.Options{})
	p.login(t, ctx)
	checkStreamedAnswer(t, chromiumPage{ctx}, b)
}

func TestStreamedAnswerIsShownAsTextInFirefox(t *testing.T) {
	browsertest.FindFirefox(t)
	b := streamingFleet()
	p := servePage(t, b)
	checkStreamedAnswer(t, firefoxPage{firefoxLoggedIn(t, p)}, b)
}

func streamingFleet() *fakeFleet {
	b := newFakeFleet()
	b.status = controlapi.Status{
		Agents:    []controlapi.Agent{{Name: "box", State: "established", Policy: "steer", Platform: "linux-x64"}},
		Instances: []controlapi.Instance{{ID: "i-1", Agent: "box", Cwd: "/src/app", State: "running", Bundle: "default"}},
	}
	return b
}

func checkStreamedAnswer(t *testing.T, br loadBrowser, b *fakeFleet) {
	t.Helper()
	var ok bool
	if err := br.eval(`(location.hash = '#/worker/i-1', true)`, &ok); err != nil {
		t.Fatal(err)
	}
	if err := br.until(step, `document.querySelector('#w-transcript li.info')`); err != nil { // loaded: nothing yet
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
	streaming := `document.querySelector('#w-transcript li.streaming .text')`
	if err := br.until(step, `(`+streaming+`?.textContent.length ?? 0) >= `+jsLen(text)); err != nil {
		t.Fatalf("the streamed answer is not shown: %v", err)
	}
	var got struct {
		Text  string `json:"text"`
		Nodes int    `json:"nodes"`
	}
	if err := br.eval(`({text: `+streaming+`.textContent, nodes: `+streaming+`.childNodes.length})`, &got); err != nil {
		t.Fatal(err)
	}
	if got.Text != text || got.Nodes != 1 {
		t.Errorf("streaming shows %d nodes with\n%q\nwant one text node with\n%q", got.Nodes, got.Text, text)
	}
	publish(events[last:])
	finished := `[...document.querySelectorAll('#w-transcript li.assistant:not(.streaming) .text')]`
	if err := br.until(step, `!document.querySelector('#w-transcript li.streaming') && `+finished+`.length === 1`); err != nil {
		t.Fatalf("the finished answer is not shown: %v", err)
	}
	var final string
	if err := br.eval(finished+`[0].textContent`, &final); err != nil || final != text {
		t.Errorf("the finished answer is shown as %q (%v)", final, err)
	}
	var v struct {
		Pwned   any `json:"pwned"`
		Images  int `json:"images"`
		Scripts int `json:"scripts"`
	}
	err := br.eval(`({pwned: window.__pwned ?? null, images: document.querySelectorAll('main img').length, scripts: document.querySelectorAll('main script').length})`, &v)
	if err != nil || v.Pwned != nil || v.Images != 0 || v.Scripts != 0 {
		t.Errorf("streamed worker output became markup: %+v %v", v, err)
	}
}

// jsLen is the length of s as JavaScript counts it (UTF-16 units).
func jsLen(s string) string { return strconv.Itoa(len(utf16.Encode([]rune(s)))) }
