package pirpc

import (
	"fmt"
	"testing"
	"time"
)

// A settle step is one input to the detector and the action expected.
type settleStep struct {
	name string
	feed func(d *SettleDetector) SettleAction
	want SettleAction
}

func ev(t EventType) settleStep {
	return settleStep{name: string(t), feed: func(d *SettleDetector) SettleAction { return d.OnEvent(&Event{Type: t}) }}
}

func assistantEnd(stop string) settleStep {
	return settleStep{name: "message_end(assistant," + stop + ")", feed: func(d *SettleDetector) SettleAction {
		return d.OnEvent(&Event{Type: EventMessageEnd, Message: &Message{Role: RoleAssistant, StopReason: stop}})
	}}
}

func compactionEnd(willRetry bool) settleStep {
	return settleStep{name: fmt.Sprintf("compaction_end(willRetry=%v)", willRetry), feed: func(d *SettleDetector) SettleAction {
		return d.OnEvent(&Event{Type: EventCompactionEnd, Compaction: &Compaction{Reason: "threshold", WillRetry: willRetry}})
	}}
}

func nativeSettled(aborted bool) settleStep {
	return settleStep{name: "agent_settled", feed: func(d *SettleDetector) SettleAction {
		return d.OnEvent(&Event{Type: EventAgentSettled, Aborted: aborted})
	}}
}

func answer(token uint64, streaming bool, pending int) settleStep {
	return settleStep{name: fmt.Sprintf("answer(%d,streaming=%v,pending=%d)", token, streaming, pending), feed: func(d *SettleDetector) SettleAction {
		return d.OnBarrier(token, BarrierState{IsStreaming: streaming, PendingMessageCount: pending})
	}}
}

func timeout(token uint64) settleStep {
	return settleStep{name: fmt.Sprintf("timeout(%d)", token), feed: func(d *SettleDetector) SettleAction { return d.OnTimeout(token) }}
}

func setNative() settleStep {
	return settleStep{name: "SetNative", feed: func(d *SettleDetector) SettleAction { d.SetNative(); return SettleAction{} }}
}

func (s settleStep) expect(a SettleAction) settleStep { s.want = a; return s }

func barrier(token uint64) SettleAction { return SettleAction{Barrier: token} }
func waitRun(token uint64) SettleAction {
	return SettleAction{Wait: token, WaitFor: time.Second}
}
func settled(aborted, native bool) SettleAction {
	return SettleAction{Settled: &Settle{Aborted: aborted, Native: native}}
}

var duplicate = SettleAction{Duplicate: true}

// run is the event run of a plain text prompt up to agent_end.
func run(stop string) []settleStep {
	return []settleStep{
		ev(EventAgentStart), ev(EventTurnStart), ev(EventMessageStart), ev(EventMessageEnd),
		ev(EventMessageStart), ev(EventMessageUpdate), assistantEnd(stop), ev(EventTurnEnd),
	}
}

func seq(parts ...any) []settleStep {
	var out []settleStep
	for _, p := range parts {
		switch p := p.(type) {
		case settleStep:
			out = append(out, p)
		case []settleStep:
			out = append(out, p...)
		}
	}
	return out
}

// The sequences of pi-rpc.md ("When is the worker idle?"), each step with
// the action the detector must ask for.
var settleCases = []struct {
	name  string
	steps []settleStep
	phase SettlePhase // at the end
}{
	{"plain prompt", seq(run(StopReasonStop), ev(EventAgentEnd).expect(barrier(1)),
		answer(1, false, 0).expect(settled(false, false))), PhaseIdle},
	{"prompt with tool calls and two turns", seq(
		ev(EventAgentStart), ev(EventTurnStart), ev(EventMessageStart), ev(EventMessageEnd),
		assistantEnd(StopReasonToolUse), ev(EventToolExecutionStart), ev(EventToolExecutionStart),
		ev(EventToolExecutionUpdate), ev(EventToolExecutionEnd), ev(EventToolExecutionEnd),
		ev(EventMessageStart), ev(EventMessageEnd), ev(EventTurnEnd), ev(EventTurnStart),
		assistantEnd(StopReasonStop), ev(EventTurnEnd), ev(EventAgentEnd).expect(barrier(1)),
		answer(1, false, 0).expect(settled(false, false))), PhaseIdle},
	{"queued steer and follow-up stay in one run", seq(
		ev(EventAgentStart), ev(EventQueueUpdate), assistantEnd(StopReasonStop), ev(EventTurnEnd),
		ev(EventTurnStart), ev(EventQueueUpdate), assistantEnd(StopReasonStop), ev(EventTurnEnd),
		ev(EventAgentEnd).expect(barrier(1)), answer(1, false, 0).expect(settled(false, false))), PhaseIdle},
	{"auto-retry that succeeds: the first barrier's answer is stale", seq(
		run(StopReasonError), ev(EventAgentEnd).expect(barrier(1)), ev(EventAutoRetryStart),
		answer(1, false, 0), // written before the retry's agent_start
		ev(EventAgentStart), ev(EventTurnStart), assistantEnd(StopReasonStop), ev(EventAutoRetryEnd),
		ev(EventTurnEnd), ev(EventAgentEnd).expect(barrier(2)),
		answer(2, false, 0).expect(settled(false, false))), PhaseIdle},
	{"auto-retry exhausted: auto_retry_end after the last agent_end", seq(
		run(StopReasonError), ev(EventAgentEnd).expect(barrier(1)), ev(EventAutoRetryStart),
		ev(EventAgentStart), assistantEnd(StopReasonError), ev(EventTurnEnd), ev(EventAgentEnd).expect(barrier(2)),
		ev(EventAutoRetryStart), answer(2, false, 0),
		ev(EventAgentStart), assistantEnd(StopReasonError), ev(EventTurnEnd), ev(EventAgentEnd).expect(barrier(3)),
		ev(EventAutoRetryEnd), answer(3, false, 0).expect(settled(false, false))), PhaseIdle},
	{"auto-retry cancelled during its delay (abort_retry)", seq(
		run(StopReasonError), ev(EventAgentEnd).expect(barrier(1)), ev(EventAutoRetryStart),
		answer(1, false, 0), ev(EventAutoRetryEnd).expect(barrier(2)),
		answer(2, false, 0).expect(settled(false, false))), PhaseIdle},
	{"threshold compaction after the run", seq(
		run(StopReasonStop), ev(EventAgentEnd).expect(barrier(1)), ev(EventCompactionStart),
		answer(1, false, 0), compactionEnd(false).expect(barrier(2)),
		answer(2, false, 0).expect(settled(false, false))), PhaseIdle},
	{"compaction with queued messages: pi runs them", seq(
		run(StopReasonStop), ev(EventAgentEnd).expect(barrier(1)), ev(EventCompactionStart),
		compactionEnd(false).expect(barrier(2)), answer(1, false, 2),
		answer(2, false, 2).expect(waitRun(3)),
		ev(EventAgentStart), timeout(3), assistantEnd(StopReasonStop), ev(EventTurnEnd),
		ev(EventAgentEnd).expect(barrier(4)), answer(4, false, 0).expect(settled(false, false))), PhaseIdle},
	{"compaction with queued messages that never run", seq(
		run(StopReasonStop), ev(EventAgentEnd).expect(barrier(1)), ev(EventCompactionStart),
		compactionEnd(false).expect(barrier(2)), answer(2, false, 1).expect(waitRun(3)),
		timeout(3).expect(barrier(4)), answer(4, false, 1).expect(settled(false, false))), PhaseIdle},
	{"overflow: compaction then the retried run", seq(
		run(StopReasonError), ev(EventAgentEnd).expect(barrier(1)), ev(EventCompactionStart),
		compactionEnd(true).expect(waitRun(2)), answer(1, false, 0),
		ev(EventAgentStart), assistantEnd(StopReasonStop), ev(EventTurnEnd),
		ev(EventAgentEnd).expect(barrier(3)), timeout(2), answer(3, false, 0).expect(settled(false, false))), PhaseIdle},
	{"silent overflow: willRetry but no run", seq(
		run(StopReasonStop), ev(EventAgentEnd).expect(barrier(1)), ev(EventCompactionStart),
		compactionEnd(true).expect(waitRun(2)), timeout(2).expect(barrier(3)),
		answer(3, false, 0).expect(settled(false, false))), PhaseIdle},
	{"manual compact while idle settles nothing", seq(
		ev(EventCompactionStart), compactionEnd(false)), PhaseIdle},
	{"manual compact mid-run ends the run", seq(
		ev(EventAgentStart), ev(EventTurnStart), ev(EventCompactionStart),
		compactionEnd(false).expect(barrier(1)), answer(1, false, 0).expect(settled(false, false))), PhaseIdle},
	{"abort: settles with aborted", seq(run(StopReasonAborted), ev(EventAgentEnd).expect(barrier(1)),
		answer(1, false, 0).expect(settled(true, false))), PhaseIdle},
	{"a run begins before the barrier's answer", seq(run(StopReasonStop), ev(EventAgentEnd).expect(barrier(1)),
		answer(1, true, 0), ev(EventAgentStart), assistantEnd(StopReasonStop),
		ev(EventAgentEnd).expect(barrier(2)), answer(2, false, 0).expect(settled(false, false))), PhaseIdle},
	{"answer streaming, then the run's agent_end", seq(run(StopReasonStop), ev(EventAgentEnd).expect(barrier(1)),
		answer(1, true, 0), ev(EventAgentEnd).expect(barrier(2)), answer(2, false, 0).expect(settled(false, false))), PhaseIdle},
	{"agent_end without agent_start (attached mid-run)", seq(assistantEnd(StopReasonStop),
		ev(EventAgentEnd).expect(barrier(1)), answer(1, false, 0).expect(settled(false, false))), PhaseIdle},
	{"a failed barrier (no state) still settles", seq(run(StopReasonStop), ev(EventAgentEnd).expect(barrier(1)),
		answer(1, false, 0).expect(settled(false, false)), answer(1, false, 0)), PhaseIdle},
	{"stale and unknown tokens are ignored", seq(answer(7, false, 0), timeout(9), run(StopReasonStop),
		answer(0, false, 0), timeout(0)), PhaseRunning},
	{"native agent_settled before the barrier's answer", seq(run(StopReasonStop), ev(EventAgentEnd).expect(barrier(1)),
		nativeSettled(false).expect(settled(false, true)), answer(1, false, 0),
		run(StopReasonAborted), ev(EventAgentEnd), nativeSettled(true).expect(settled(true, true))), PhaseIdle},
	{"native agent_settled after a synthetic settle is a duplicate", seq(run(StopReasonStop),
		ev(EventAgentEnd).expect(barrier(1)), answer(1, false, 0).expect(settled(false, false)),
		nativeSettled(false).expect(duplicate), run(StopReasonStop), ev(EventAgentEnd),
		nativeSettled(false).expect(settled(false, true))), PhaseIdle},
	{"SetNative: no barriers, retries and compactions ignored", seq(setNative(), run(StopReasonError),
		ev(EventAgentEnd), ev(EventAutoRetryStart), ev(EventAgentStart), ev(EventAgentEnd),
		ev(EventCompactionStart), compactionEnd(true), ev(EventAutoRetryEnd),
		nativeSettled(false).expect(settled(false, true))), PhaseIdle},
}

func TestSettleDetectorSequences(t *testing.T) {
	for _, tc := range settleCases {
		t.Run(tc.name, func(t *testing.T) {
			d := NewSettleDetector(time.Second)
			for i, st := range tc.steps {
				got := st.feed(d)
				if !sameAction(got, st.want) {
					t.Fatalf("step %d %s: got %s, want %s", i, st.name, fmtAction(got), fmtAction(st.want))
				}
			}
			if d.Phase() != tc.phase {
				t.Errorf("final phase %v, want %v", d.Phase(), tc.phase)
			}
		})
	}
}

// TestSettleDetectorSettlesOncePerRun checks the invariant over every case:
// never two settles without an agent_start or agent_end in between.
func TestSettleDetectorSettlesOncePerRun(t *testing.T) {
	for _, tc := range settleCases {
		d := NewSettleDetector(time.Second)
		settles, ranSince := 0, false
		for _, st := range tc.steps {
			a := st.feed(d)
			if a.Settled != nil {
				if settles > 0 && !ranSince {
					t.Errorf("%s: second settle without a run in between", tc.name)
				}
				settles++
				ranSince = false
			}
			if st.name == string(EventAgentStart) || st.name == string(EventAgentEnd) {
				ranSince = true
			}
		}
	}
}

func TestSettleDetectorDefaultRunWait(t *testing.T) {
	d := NewSettleDetector(0)
	for _, st := range seq(run(StopReasonStop), ev(EventAgentEnd), ev(EventCompactionStart)) {
		st.feed(d)
	}
	a := compactionEnd(true).feed(d)
	if a.WaitFor != DefaultRunWait {
		t.Fatalf("WaitFor = %v, want %v", a.WaitFor, DefaultRunWait)
	}
	if d.Phase() != PhaseAwaitRun || d.Phase().String() != "await_run" {
		t.Fatalf("phase %v", d.Phase())
	}
}

func sameAction(a, b SettleAction) bool {
	if a.Barrier != b.Barrier || a.Wait != b.Wait || a.Duplicate != b.Duplicate {
		return false
	}
	if a.Wait != 0 && a.WaitFor != b.WaitFor {
		return false
	}
	if (a.Settled == nil) != (b.Settled == nil) {
		return false
	}
	return a.Settled == nil || *a.Settled == *b.Settled
}

func fmtAction(a SettleAction) string {
	s := fmt.Sprintf("{barrier:%d wait:%d dup:%v", a.Barrier, a.Wait, a.Duplicate)
	if a.Settled != nil {
		s += fmt.Sprintf(" settled:%+v", *a.Settled)
	}
	return s + "}"
}
