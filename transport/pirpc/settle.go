package pirpc

import "time"

// DefaultRunWait is how long the settle detector waits for the run pi
// starts by itself after a compaction (pi starts it ~100 ms after
// compaction_end; sometimes it reports willRetry and starts nothing).
const DefaultRunWait = 2 * time.Second

// SettlePhase is where a SettleDetector stands.
type SettlePhase int

// The phases of the settle detector.
const (
	// PhaseIdle: nothing is owed; the worker is idle or never ran.
	PhaseIdle SettlePhase = iota
	// PhaseRunning: between agent_start and agent_end.
	PhaseRunning
	// PhaseBarrier: a run ended; a get_state barrier is in flight.
	PhaseBarrier
	// PhaseRetrying: auto_retry_start came; the retry's run is awaited.
	PhaseRetrying
	// PhaseCompacting: compaction_start came; compaction_end is awaited.
	PhaseCompacting
	// PhaseAwaitRun: after a compaction pi will start a run by itself
	// (willRetry, or queued messages); its agent_start is awaited, with a
	// timeout.
	PhaseAwaitRun
)

func (p SettlePhase) String() string {
	switch p {
	case PhaseIdle:
		return "idle"
	case PhaseRunning:
		return "running"
	case PhaseBarrier:
		return "barrier"
	case PhaseRetrying:
		return "retrying"
	case PhaseCompacting:
		return "compacting"
	case PhaseAwaitRun:
		return "await_run"
	}
	return "unknown"
}

// Settle describes the moment a worker became idle after a run.
type Settle struct {
	// Aborted is true when the run's last assistant message was aborted.
	Aborted bool
	// Native is true when pi sent agent_settled itself (newer pi).
	Native bool
}

// SettleAction is what the driver must do after feeding the detector.
// Several fields can be set at once; the zero value asks for nothing.
type SettleAction struct {
	// Barrier, when non-zero, asks for a get_state to be sent now; its
	// answer is reported with OnBarrier(Barrier, …).
	Barrier uint64
	// Wait, when non-zero, asks for OnTimeout(Wait) to be called after
	// WaitFor, unless an event makes it stale first.
	Wait    uint64
	WaitFor time.Duration
	// Settled is set at the moment the worker became idle after a run:
	// exactly once per run, however many retries and compactions it took.
	Settled *Settle
	// Duplicate marks a native agent_settled that repeats a settle the
	// detector already reported (it emitted its own before it knew that
	// pi sends them); forward-only consumers should drop that event.
	Duplicate bool
}

// BarrierState is what the settle detector needs from a get_state answer.
type BarrierState struct {
	IsStreaming         bool
	PendingMessageCount int
}

// SettleDetector derives "the worker is idle" from pi's event stream:
//
//   - agent_end → send a get_state barrier; auto_retry_start and
//     compaction_start are written in the same synchronous step as the
//     agent_end, so they arrive before the barrier's answer if they come;
//   - auto_retry_start before the answer → wait for the retry's agent_end
//     (or for auto_retry_end if the retry is cancelled before it starts);
//   - compaction_start → wait for compaction_end, then for the run pi
//     starts by itself when willRetry is set or messages are queued (with
//     a timeout: a "silent overflow" reports willRetry and runs nothing);
//   - settled when a barrier's answer shows isStreaming:false with none of
//     the above in between;
//   - a newer pi's own agent_settled is used directly; once one was seen
//     (or SetNative was called) no barrier is issued any more.
//
// It is a pure value: no goroutines, no clock, no I/O. Feed it in stdout
// order; the driver (Client) performs the SettleActions it returns.
//
// Why not an fsmkit table: this is not one of the documented lifecycles, and
// its transitions are guarded by data (barrier tokens, isStreaming,
// willRetry, pendingMessageCount, whether a settle is owed). As a table,
// every guard outcome would have to become its own event classified by the
// caller, which would move the logic out of the machine rather than into
// it. The phases are still explicit (SettlePhase) and every sequence of
// pi-rpc.md is tested against it.
type SettleDetector struct {
	phase     SettlePhase
	owed      bool   // a run ended (or was cut) since the last settle
	barrier   uint64 // token of the barrier in flight, 0 if none
	wait      uint64 // token of the armed run wait, 0 if none
	tokens    uint64 // last token minted
	native    bool   // pi sends agent_settled itself
	aborted   bool   // the last assistant message was aborted
	compacted bool   // a compaction ended since the last agent_start
	waited    bool   // the run wait timed out; settle even with queued messages
	runWait   time.Duration
}

// NewSettleDetector returns a detector that waits runWait for a run after a
// compaction (<= 0 means DefaultRunWait).
func NewSettleDetector(runWait time.Duration) *SettleDetector {
	if runWait <= 0 {
		runWait = DefaultRunWait
	}
	return &SettleDetector{runWait: runWait}
}

// Phase returns the current phase.
func (d *SettleDetector) Phase() SettlePhase { return d.phase }

// Native reports whether pi is known to send agent_settled itself.
func (d *SettleDetector) Native() bool { return d.native }

// SetNative records that pi sends agent_settled itself (for example
// because a prompt response carried data, which 0.73.1's never does).
func (d *SettleDetector) SetNative() { d.native = true }

func (d *SettleDetector) mint() uint64 {
	d.tokens++
	return d.tokens
}

// issueBarrier moves to PhaseBarrier and asks for a get_state.
func (d *SettleDetector) issueBarrier() SettleAction {
	d.phase = PhaseBarrier
	d.wait = 0
	d.barrier = d.mint()
	return SettleAction{Barrier: d.barrier}
}

func (d *SettleDetector) awaitRun() SettleAction {
	d.phase = PhaseAwaitRun
	d.barrier = 0
	d.wait = d.mint()
	return SettleAction{Wait: d.wait, WaitFor: d.runWait}
}

func (d *SettleDetector) settle(native bool) SettleAction {
	s := &Settle{Aborted: d.aborted, Native: native}
	d.phase = PhaseIdle
	d.owed = false
	d.barrier, d.wait = 0, 0
	d.compacted, d.waited = false, false
	d.aborted = false
	return SettleAction{Settled: s}
}

// OnEvent feeds one event, in stdout order.
func (d *SettleDetector) OnEvent(ev *Event) SettleAction {
	switch ev.Type {
	case EventAgentStart:
		d.phase = PhaseRunning
		d.owed = true
		d.barrier, d.wait = 0, 0
		d.compacted, d.waited = false, false
	case EventMessageEnd:
		if ev.Message != nil && ev.Message.Role == RoleAssistant {
			d.aborted = ev.Message.StopReason == StopReasonAborted
		}
	case EventAgentEnd:
		d.owed = true
		if d.native {
			d.phase = PhaseIdle // pi will say agent_settled itself
			return SettleAction{}
		}
		return d.issueBarrier()
	case EventAutoRetryStart:
		if d.native {
			return SettleAction{}
		}
		d.owed = true
		d.phase = PhaseRetrying
		d.barrier, d.wait = 0, 0
	case EventAutoRetryEnd:
		// A retry cancelled during its delay (abort_retry) ends without
		// another run: nothing else will come.
		if d.phase == PhaseRetrying && !d.native {
			return d.issueBarrier()
		}
	case EventCompactionStart:
		if d.native {
			return SettleAction{}
		}
		if d.phase == PhaseRunning {
			// A manual compact aborts the run, and pi may not forward
			// that run's agent_end: the compaction ends it.
			d.owed = true
		}
		d.phase = PhaseCompacting
		d.barrier, d.wait = 0, 0
	case EventCompactionEnd:
		if d.native || d.phase != PhaseCompacting {
			return SettleAction{}
		}
		d.compacted = true
		willRetry := ev.Compaction != nil && ev.Compaction.WillRetry
		switch {
		case willRetry:
			return d.awaitRun()
		case d.owed:
			return d.issueBarrier()
		default:
			// A manual compaction while idle: no run to settle.
			d.phase = PhaseIdle
			d.compacted = false
		}
	case EventAgentSettled:
		d.native = true
		if d.owed || d.phase != PhaseIdle {
			return d.settle(true)
		}
		return SettleAction{Duplicate: true}
	}
	return SettleAction{}
}

// OnBarrier feeds the answer to the barrier token. A stale token (an event
// superseded the barrier) is ignored.
func (d *SettleDetector) OnBarrier(token uint64, st BarrierState) SettleAction {
	if token == 0 || token != d.barrier || d.phase != PhaseBarrier {
		return SettleAction{}
	}
	d.barrier = 0
	switch {
	case st.IsStreaming:
		// A new run began between agent_end and the answer (its
		// agent_start is on its way, or was sent by someone else).
		d.phase = PhaseRunning
		return SettleAction{}
	case d.compacted && st.PendingMessageCount > 0 && !d.waited:
		// pi delivers queued messages ~100 ms after a compaction.
		return d.awaitRun()
	}
	return d.settle(false)
}

// OnTimeout reports that the run wait with this token expired. A stale
// token is ignored.
func (d *SettleDetector) OnTimeout(token uint64) SettleAction {
	if token == 0 || token != d.wait || d.phase != PhaseAwaitRun {
		return SettleAction{}
	}
	d.wait = 0
	d.waited = true
	return d.issueBarrier()
}
