package worker

import (
	"encoding/json"
	"errors"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"example.com/pifleet/transport/pirpc"
	"github.com/google/go-cmp/cmp"
)

func TestRing(t *testing.T) {
	r := newRing(3)
	if evs, first, gap := r.since(0); len(evs) != 0 || first != 0 || gap {
		t.Fatalf("empty ring: %v %d %v", evs, first, gap)
	}
	for _, seq := range []uint64{2, 4, 5, 9} {
		r.push(Event{Seq: seq})
	}
	seqs := func(evs []Event) (out []uint64) {
		for _, ev := range evs {
			out = append(out, ev.Seq)
		}
		return out
	}
	for _, tc := range []struct {
		after   uint64
		want    []uint64
		wantGap bool
	}{
		{0, []uint64{4, 5, 9}, true}, // 2 was pushed out
		{1, []uint64{4, 5, 9}, true},
		{2, []uint64{4, 5, 9}, false}, // the caller has 2 already
		{3, []uint64{4, 5, 9}, false},
		{5, []uint64{9}, false},
		{9, nil, false},
	} {
		evs, first, gap := r.since(tc.after)
		if diff := cmp.Diff(tc.want, seqs(evs)); diff != "" || first != 4 || gap != tc.wantGap {
			t.Errorf("since(%d): first %d gap %v, diff %s", tc.after, first, gap, diff)
		}
	}
}

func TestAutoAnswerKeys(t *testing.T) {
	answers := map[string]any{"confirm:Deploy?": true, "Deploy?": false, "select": "a", "input:Name": nil}
	for _, tc := range []struct {
		method, title string
		want          any
		found         bool
	}{
		{"confirm", "Deploy?", true, true}, // method:title wins
		{"select", "Deploy?", false, true}, // then title
		{"select", "Pick", "a", true},      // then method
		{"input", "Name", nil, true},       // nil: cancel
		{"editor", "Other", nil, false},
	} {
		got, ok := autoAnswer(answers, tc.method, tc.title)
		if got != tc.want || ok != tc.found {
			t.Errorf("autoAnswer(%s, %s) = %v, %v; want %v, %v", tc.method, tc.title, got, ok, tc.want, tc.found)
		}
	}
}

func TestDialogResponse(t *testing.T) {
	for _, tc := range []struct {
		method    string
		value     any
		cancelled bool
		want      string
	}{
		{"confirm", true, false, `{"type":"extension_ui_response","id":"d","confirmed":true}`},
		{"confirm", "no", false, `{"type":"extension_ui_response","id":"d","confirmed":false}`},
		{"select", "b", false, `{"type":"extension_ui_response","id":"d","value":"b"}`},
		{"input", 42, false, `{"type":"extension_ui_response","id":"d","value":"42"}`},
		{"editor", "x", true, `{"type":"extension_ui_response","id":"d","cancelled":true}`},
		{"input", nil, false, `{"type":"extension_ui_response","id":"d","cancelled":true}`},
	} {
		got, err := dialogResponse("d", tc.method, tc.value, tc.cancelled)
		if err != nil {
			t.Fatal(err)
		}
		var a, b any
		json.Unmarshal(got, &a)
		json.Unmarshal([]byte(tc.want), &b)
		if diff := cmp.Diff(b, a); diff != "" {
			t.Errorf("%s %v: got %s, want %s", tc.method, tc.value, got, tc.want)
		}
	}
	if _, err := dialogResponse("d", "confirm", 3, false); !errors.Is(err, ErrBadCommand) {
		t.Errorf("confirm with 3: %v, want ErrBadCommand", err)
	}
	if got, want := string(safeDefault("d", "confirm")), `{"type":"extension_ui_response","id":"d","confirmed":false}`; got != want {
		t.Errorf("safe default confirm = %s", got)
	}
	if got, want := string(safeDefault("d", "select")), `{"type":"extension_ui_response","id":"d","cancelled":true}`; got != want {
		t.Errorf("safe default select = %s", got)
	}
}

func TestWithSession(t *testing.T) {
	got := withSession([]string{"pi", "--mode", "rpc", "--session-dir", "/s", "--no-session", "--session", "old", "--session=x", "-c", "--tools", "read"}, "/s/f.jsonl")
	want := []string{"pi", "--mode", "rpc", "--tools", "read", "--session", "/s/f.jsonl"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Error(diff)
	}
}

func TestBudgetMeter(t *testing.T) {
	msg := func(cost float64) *pirpc.Event {
		return &pirpc.Event{Type: pirpc.EventMessageEnd, Message: &pirpc.Message{Role: pirpc.RoleAssistant, Usage: &pirpc.Usage{Cost: pirpc.UsageCost{Total: cost}}}}
	}
	b := budgetMeter{limit: Budget{MaxCost: 3}}
	if got := b.observe(msg(2)); got != "" {
		t.Errorf("$2 of $3 breached %q", got)
	}
	if got := b.observe(msg(1)); got != "" {
		t.Errorf("$3 of $3 breached %q (strictly greater is a breach)", got)
	}
	if got := b.observe(msg(0.01)); got != LimitCost {
		t.Errorf("$3.01 of $3: %q, want maxCost", got)
	}
	if got := b.observe(msg(1)); got != "" {
		t.Errorf("breach reported twice: %q", got)
	}
	if got := b.settle(); got != LimitCost || !b.overNow() {
		t.Errorf("settle = %q, overNow %v; want sticky maxCost", got, b.overNow())
	}

	b = budgetMeter{limit: Budget{MaxTurns: 2}}
	for i, want := range []string{"", "", LimitTurns} {
		if got := b.observe(&pirpc.Event{Type: pirpc.EventTurnStart}); got != want {
			t.Errorf("turn %d: %q, want %q", i+1, got, want)
		}
		b.observe(&pirpc.Event{Type: pirpc.EventTurnEnd})
	}

	b = budgetMeter{limit: Budget{MaxMinutes: 0.5}}
	if b.runLimit() != 30*time.Second {
		t.Errorf("runLimit = %v", b.runLimit())
	}
	if b.expire() != LimitMinutes || b.expire() != "" || b.settle() != LimitMinutes || b.settle() != "" {
		t.Error("maxMinutes must be reported once, and only for its run")
	}
}

// fake drives a Worker without a shim: events go straight into its
// handlers, and its own commands are answered by hand.
type fake struct {
	t   *testing.T
	w   *Worker
	seq uint64
	out chan Event
}

func newFake(t *testing.T, spec Spec) *fake {
	spec.InstanceID = "i-000000000000"
	f := &fake{t: t, w: newWorker(spec.withDefaults()), out: make(chan Event, 100)}
	f.w.machine, _ = WorkerTable.Restore(StateIdle)
	go func() {
		for ev := range f.w.Events() {
			f.out <- ev
		}
		close(f.out)
	}()
	t.Cleanup(func() {
		f.w.shutdown()
		for range f.out {
		}
	})
	return f
}

func (f *fake) feed(line string) {
	f.t.Helper()
	rec, err := pirpc.ParseRecord([]byte(line))
	if err != nil {
		f.t.Fatal(err)
	}
	f.seq++
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	if rec.Event == nil {
		f.t.Fatalf("not an event: %s", line)
	}
	f.w.onEventLocked(nil, 0, f.seq, rec)
}

// answerLast answers the worker's latest own command.
func (f *fake) answerLast(command, data string) {
	f.t.Helper()
	f.seq++
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	id := f.w.idPrefix + strconv.FormatUint(f.w.nextID, 10)
	h := f.w.pending[id]
	if h == nil {
		f.t.Fatalf("no own command %s pending", id)
	}
	delete(f.w.pending, id)
	for _, ev := range h(&pirpc.Response{ID: id, Command: command, Success: true, Data: json.RawMessage(data)}, f.seq) {
		f.w.emitLocked(nil, 0, ev)
	}
}

func (f *fake) settledEvent() *Settled {
	f.t.Helper()
	for ev := range f.out {
		if ev.Settled != nil {
			return ev.Settled
		}
	}
	f.t.Fatal("events ended without a settle")
	return nil
}

func TestMaxMinutesVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(t, Spec{Budget: Budget{MaxMinutes: 1}})
		f.feed(`{"type":"agent_start"}`)
		pendingBefore := len(f.w.pending)
		time.Sleep(59 * time.Second)
		synctest.Wait()
		f.w.mu.Lock()
		early := f.w.budget.runBreached
		f.w.mu.Unlock()
		if early != "" {
			t.Fatal("breached before a minute passed")
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		f.w.mu.Lock()
		breached, aborts := f.w.budget.runBreached, len(f.w.pending)-pendingBefore
		f.w.mu.Unlock()
		if breached != LimitMinutes || aborts != 1 {
			t.Fatalf("after 61 s: breach %q, %d abort sent; want maxMinutes and one abort", breached, aborts)
		}
		f.answerLast("abort", "")
		f.feed(`{"type":"agent_end","messages":[]}`)
		f.answerLast("get_state", `{"isStreaming":false,"pendingMessageCount":0}`)
		st := f.settledEvent()
		if !st.BudgetExceeded || st.BudgetReason != LimitMinutes {
			t.Errorf("Settled = %+v, want maxMinutes", st)
		}
		// The next run has its own minute.
		f.feed(`{"type":"agent_start"}`)
		time.Sleep(30 * time.Second)
		f.feed(`{"type":"agent_end","messages":[]}`)
		f.answerLast("get_state", `{"isStreaming":false,"pendingMessageCount":0}`)
		if st := f.settledEvent(); st.BudgetExceeded {
			t.Errorf("a 30 s run reported %+v", st)
		}
		time.Sleep(time.Hour) // no timer left to fire
		synctest.Wait()
	})
}

func TestDialogTimeoutVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFake(t, Spec{DialogTimeout: time.Minute})
		f.feed(`{"type":"extension_ui_request","id":"d1","method":"confirm","title":"Deploy?","message":"now"}`)
		f.feed(`{"type":"extension_ui_request","id":"d2","method":"select","title":"Pick","options":["a","b"],"timeout":10000}`)
		f.feed(`{"type":"extension_ui_request","id":"n","method":"notify","message":"fyi"}`)
		var uis []*UIRequest
		for range 3 {
			ev := <-f.out
			if ev.UIRequest != nil {
				uis = append(uis, ev.UIRequest)
			}
		}
		if len(uis) != 2 || uis[1].Timeout != 10*time.Second || uis[1].Options[1] != "b" {
			t.Fatalf("dialog requests = %+v, want two (notify is no dialog)", uis)
		}
		// ended reads the next event, which must say that the dialog
		// ended unanswered.
		ended := func(want DialogOutcome) {
			t.Helper()
			select {
			case ev := <-f.out:
				if ev.Kind != KindDialogEnded || ev.DialogEnded == nil || *ev.DialogEnded != want {
					t.Errorf("event %s %+v, want the dialog ended: %+v", ev.Kind, ev.DialogEnded, want)
				}
			default:
				t.Errorf("no event says that dialog %s ended", want.RequestID)
			}
		}
		time.Sleep(11 * time.Second)
		synctest.Wait()
		ended(DialogOutcome{"d2", "select", "Pick", OutcomeTimedOut})
		if err := f.w.AnswerUI("d2", "a", false); !errors.Is(err, ErrUnknownDialog) {
			t.Errorf("answer after the select's own timeout: %v, want ErrUnknownDialog", err)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		ended(DialogOutcome{"d1", "confirm", "Deploy?", OutcomeTimedOut})
		f.feed(`{"type":"agent_start"}`)
		f.feed(`{"type":"agent_end","messages":[]}`)
		f.answerLast("get_state", `{"isStreaming":false,"pendingMessageCount":0}`)
		st := f.settledEvent()
		want := []DialogOutcome{{"d2", "select", "Pick", OutcomeTimedOut}, {"d1", "confirm", "Deploy?", OutcomeTimedOut}}
		if diff := cmp.Diff(want, st.Dialogs); diff != "" || !st.Escalated {
			t.Errorf("escalated %v, dialogs (-want +got):\n%s", st.Escalated, diff)
		}
	})
}

func FuzzCommandType(f *testing.F) {
	for _, s := range []string{`{"type":"prompt","message":"x"}`, `{"type":""}`, `[]`, `{"type":1}`, `null`, `{"id":"a"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		typ, err := commandType(b)
		if err != nil {
			if !errors.Is(err, ErrBadCommand) {
				t.Fatalf("error %v does not match ErrBadCommand", err)
			}
			return
		}
		if typ == "" {
			t.Fatal("empty type accepted")
		}
	})
}

func TestNativeSettle(t *testing.T) {
	// A newer pi sends agent_settled itself. The first one repeats the
	// settle the barrier already gave: it is not forwarded. After that
	// pi's own events are the settles, carried on pi's own line.
	f := newFake(t, Spec{})
	f.feed(`{"type":"agent_start"}`)
	f.feed(`{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"one"}],"stopReason":"stop"}}`)
	f.feed(`{"type":"agent_end","messages":[]}`)
	f.answerLast("get_state", `{"isStreaming":false,"pendingMessageCount":0}`)
	f.feed(`{"type":"agent_settled","aborted":false}`) // duplicate
	f.feed(`{"type":"agent_start"}`)
	f.feed(`{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"two"}],"stopReason":"aborted"}}`)
	f.feed(`{"type":"agent_end","messages":[]}`)
	f.feed(`{"type":"agent_settled","aborted":true,"extra":1}`)
	var got []string
	for range 8 { // the duplicate is not among them
		ev := <-f.out
		got = append(got, ev.Kind)
		if ev.Settled != nil {
			got = append(got, ev.Settled.LastAssistantText+":"+strconv.FormatBool(ev.Settled.Aborted)+":"+string(ev.Raw))
		}
	}
	want := []string{
		"agent_start", "message_end", "agent_end",
		KindSettled, `one:false:{"type":"agent_settled","aborted":false}`,
		"agent_start", "message_end", "agent_end",
		KindSettled, `two:true:{"type":"agent_settled","aborted":true,"extra":1}`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestGenerationOf(t *testing.T) {
	for socket, want := range map[string]int{
		"/s/i-1.sock": 0, "/s/i-1-2.sock": 2, "/s/i-1-x.sock": 0, "/s/other-3.sock": 0, "/s/i-1-7.sockx": 0,
	} {
		if got := generationOf(socket, "i-1"); got != want {
			t.Errorf("generationOf(%s) = %d, want %d", socket, got, want)
		}
	}
}
