package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"example.com/pifleet/internal/fifo"
	"example.com/pifleet/internal/fsmkit"
	"example.com/pifleet/internal/shim"
	"example.com/pifleet/transport/pirpc"
	"github.com/rs/zerolog"
)

// Worker supervises one pi process that runs under a shim. Its methods are
// safe for concurrent use.
type Worker struct {
	spec     Spec
	log      zerolog.Logger
	idPrefix string

	mu          sync.Mutex
	gen         *generation
	gens        int // generations launched, names the sockets
	machine     fsmkit.Machine[State, LifecycleEvent]
	pid         int
	sessionPath string
	model       string
	detector    *pirpc.SettleDetector
	waitTimer   *time.Timer
	run         pirpc.Tally // the current run
	toolCalls   int         // over the worker's life
	lastText    string
	budget      budgetMeter
	runOpen     bool
	// promptSent: a prompt went to the worker and its run has not been
	// seen to start (nor the prompt refused): the worker may be busy
	// before its agent_start reached us (Stop must abort it then).
	promptSent bool
	runDone    chan struct{} // closed when the open run settles
	runTimer   *time.Timer
	runToken   uint64
	dialogs    map[string]*dialog
	outcomes   []DialogOutcome
	escalated  bool
	pending    map[string]handler
	nextID     uint64
	pin        *pinnedModel
	ring       *ring
	stderrTail string
	lines      lineParser // the worker's stdout
	restarting bool
	detached   bool
	finished   bool

	// Delivery: an unbounded queue drained by one goroutine into events.
	// The shim's window bounds it: a line is acknowledged to the shim only
	// once its event was delivered.
	qmu       sync.Mutex
	queue     fifo.Queue[item]
	qkick     chan struct{}
	events    chan Event
	stopDeliv chan struct{}
	delivDone chan struct{}
	lastSeq   uint64 // last delivered, guarded by qmu
	delivOpen bool   // runOpen as of lastSeq, guarded by qmu
	skipTo    uint64 // events up to this seq were delivered in a previous life
	// Guarded by qmu: deliver holds an item it took from the queue
	// (delivBusy) or has closed Events (delivClosed); the acknowledgement
	// owed to a shim for delivered lines, sent when a burst of lines ends.
	delivBusy   bool
	delivClosed bool
	ackGen      *generation
	ackSeq      uint64
	// ackHold: every line the owed ack covers is a message_update whose
	// ack may wait (heldAcks): it goes with the next ack that may not, or
	// when holdTimer fires (the stream paused), or when a bound is reached.
	ackHold   bool
	holdTimer *time.Timer
	holdFor   time.Duration // Spec.ackHoldFor at the start (w.spec changes at Restart)
	onAck     func(uint64)  // Spec.onAck at the start

	wg   sync.WaitGroup // read loops
	done chan struct{}  // closed once every goroutine has ended
}

// generation is one worker process and its shim.
type generation struct {
	c       *shim.Client
	socket  string
	token   string
	base    uint64 // added to the shim's seqs
	exit    *Exit
	exitSeq uint64        // the exit record's shim seq
	exited  chan struct{} // closed once the exit (or the loss) was handled
	last    uint64        // highest event seq produced from this shim
	// holdSeq is the shim seq of the line being handled when its ack may
	// wait (heldAcks); guarded by Worker.mu.
	holdSeq uint64
}

// item is one entry of the delivery queue: an event to deliver (unless
// hasEv is false: the item only acknowledges) and the shim record to
// acknowledge after it. The event is held by value: a pointer to it cost
// an allocation per queued line.
type item struct {
	ev      Event
	hasEv   bool
	g       *generation
	shimSeq uint64
	hold    bool // the ack of shimSeq may wait
	runOpen bool
	close   bool
}

// handler handles the response to one of the worker's own commands and
// returns the events it produces (they take the response line's seq).
type handler func(r *pirpc.Response, seq uint64) []Event

type dialog struct {
	ui    *UIRequest
	timer *time.Timer
}

type pinnedModel struct{ provider, id string }

func (p *pinnedModel) String() string { return p.provider + "/" + p.id }

func (s *Spec) validate() error {
	switch {
	case s.InstanceID == "":
		return &SpecError{"InstanceID", "empty"}
	case len(s.Command) == 0 || s.Command[0] == "":
		return &SpecError{"Command", "empty"}
	case len(s.ShimCommand) == 0 || s.ShimCommand[0] == "":
		return &SpecError{"ShimCommand", "empty"}
	case s.StateDir == "" || !filepath.IsAbs(s.StateDir):
		return &SpecError{"StateDir", fmt.Sprintf("%q is not an absolute path", s.StateDir)}
	case s.StopGrace < 0 || s.DialogTimeout < 0 || s.RingSize < 0:
		return &SpecError{"StopGrace/DialogTimeout/RingSize", "negative"}
	case s.Budget.MaxCost < 0 || s.Budget.MaxTurns < 0 || s.Budget.MaxMinutes < 0:
		return &SpecError{"Budget", "negative limit"}
	}
	return nil
}

func (s Spec) withDefaults() Spec {
	if s.StopGrace == 0 {
		s.StopGrace = DefaultStopGrace
	}
	if s.DialogTimeout == 0 {
		s.DialogTimeout = DefaultDialogTimeout
	}
	if s.RingSize == 0 {
		s.RingSize = DefaultRingSize
	}
	if s.ackHoldFor == 0 {
		s.ackHoldFor = defaultAckHoldFor
	}
	return s
}

func newWorker(spec Spec) *Worker {
	w := &Worker{
		spec:      spec,
		log:       spec.Log.With().Str("instance", spec.InstanceID).Logger(),
		idPrefix:  "pifleet-" + spec.InstanceID + "-",
		machine:   WorkerTable.Start(),
		detector:  pirpc.NewSettleDetector(0),
		budget:    budgetMeter{limit: spec.Budget},
		dialogs:   make(map[string]*dialog),
		pending:   make(map[string]handler),
		ring:      newRing(spec.RingSize),
		qkick:     make(chan struct{}, 1),
		events:    make(chan Event),
		stopDeliv: make(chan struct{}),
		delivDone: make(chan struct{}),
		done:      make(chan struct{}),
	}
	w.holdFor, w.onAck = spec.ackHoldFor, spec.onAck
	w.holdTimer = time.AfterFunc(time.Hour, func() { w.flushAck(true) })
	w.holdTimer.Stop()
	go w.deliver()
	go func() {
		<-w.delivDone // no generation is launched after this
		w.wg.Wait()
		close(w.done)
	}()
	return w
}

// Start launches a shim that runs spec.Command, and returns once the worker
// answered its first get_state (its session file is then known). A worker
// that exits first gives a *StartError with its stderr tail.
func Start(ctx context.Context, spec Spec) (*Worker, error) {
	if err := spec.validate(); err != nil {
		return nil, err
	}
	w := newWorker(spec.withDefaults())
	if err := w.launch(ctx, spec.Command, 0); err != nil {
		w.shutdown()
		w.awaitShim()
		return nil, err
	}
	return w, nil
}

// awaitShim waits until the shim of a worker that never started has
// ended, so that a failed or cancelled Start leaves no process behind
// when it returns. The shim ends once its worker's exit is acknowledged;
// one that does not within the stop grace is reported.
func (w *Worker) awaitShim() {
	w.mu.Lock()
	g := w.gen
	w.mu.Unlock()
	if g == nil {
		return
	}
	exited := g.c.ShimExited()
	if exited == nil {
		return
	}
	t := time.NewTimer(w.spec.StopGrace + 5*time.Second)
	defer t.Stop()
	select {
	case <-exited:
	case <-t.C:
		w.log.Warn().Msg("the shim of a worker that did not start has not ended")
	}
}

// socketPath names the socket of the n-th generation.
func (w *Worker) socketPath(n int) string {
	if n == 0 {
		return filepath.Join(w.spec.StateDir, w.spec.InstanceID+".sock")
	}
	return filepath.Join(w.spec.StateDir, w.spec.InstanceID+"-"+strconv.Itoa(n)+".sock")
}

// launch starts a shim and its worker as a new generation and waits for
// the first get_state answer.
func (w *Worker) launch(ctx context.Context, command []string, base uint64) error {
	w.mu.Lock()
	n := w.gens
	w.gens++
	w.mu.Unlock()
	socket := w.socketPath(n)
	token := shim.NewToken()
	if w.spec.OnLaunch != nil {
		h := Persisted{InstanceID: w.spec.InstanceID, Socket: socket, Token: token, SeqBase: base, LastSeq: base}
		if err := w.spec.OnLaunch(h); err != nil {
			return fmt.Errorf("worker %s: before the launch: %w", w.spec.InstanceID, err)
		}
	}
	c, err := shim.Start(ctx, shim.StartConfig{
		Executable: w.spec.ShimCommand[0],
		Args:       w.spec.ShimCommand[1:],
		LogPath:    filepath.Join(w.spec.StateDir, w.spec.InstanceID+".shim.log"),
		Shim: shim.Config{
			InstanceID: w.spec.InstanceID,
			Token:      token,
			Socket:     socket,
			Command:    command,
			Dir:        w.spec.Cwd,
			Env:        w.spec.Env,
			KillGrace:  w.spec.StopGrace,
		},
		Logger: w.log,
	})
	if errors.Is(err, shim.ErrNoShim) {
		// The shim died before this process was attached to it (killed
		// while it started): its watchdog takes the worker down with it.
		return &StartError{Exit: Exit{Code: -1, Lost: true, StderrTail: err.Error()}}
	}
	if err != nil {
		return fmt.Errorf("worker %s: %w", w.spec.InstanceID, err)
	}
	g := &generation{c: c, socket: socket, token: token, base: base, exited: make(chan struct{})}
	ready := make(chan *pirpc.Response, 1)
	w.mu.Lock()
	w.gen = g
	w.pid = c.Attached().WorkerPID
	w.detector = pirpc.NewSettleDetector(0)
	w.run = pirpc.Tally{}
	w.model = "" // a restart may bring another model: the probe says which
	w.closeRunLocked()
	w.wg.Add(1)
	go w.readLoop(g)
	w.callLocked(g, pirpc.GetState{}, func(r *pirpc.Response, _ uint64) []Event {
		w.noteState(r)
		ready <- r
		return nil
	})
	w.mu.Unlock()
	select {
	case r := <-ready:
		if err := r.Err(); err != nil {
			w.log.Warn().Err(err).Msg("first get_state failed")
		}
		w.mu.Lock()
		w.fireLocked(OnReady)
		w.mu.Unlock()
		return nil
	case <-g.exited:
		return &StartError{Exit: *g.exit}
	case <-ctx.Done():
		c.Signal(context.Background(), shim.SignalKill)
		<-g.exited
		return fmt.Errorf("worker %s: waiting for the first get_state: %w", w.spec.InstanceID, ctx.Err())
	}
}

// Adopt attaches to the shim of a worker that a previous agent process
// started, and resumes its event stream after the last delivered event.
// A run that was in flight still settles exactly once, and a worker that
// exited meanwhile reports its Exit. When the shim is not there (or a
// different one answers) the error matches ErrGone.
func Adopt(ctx context.Context, spec Spec, p Persisted) (*Worker, error) {
	spec.InstanceID = p.InstanceID
	if err := spec.validate(); err != nil {
		return nil, err
	}
	c, err := shim.Attach(ctx, shim.AttachConfig{Socket: p.Socket, InstanceID: p.InstanceID, Token: p.Token, Logger: spec.Log})
	if err != nil {
		if errors.Is(err, shim.ErrNoShim) || errors.Is(err, shim.ErrWrongShim) {
			return nil, fmt.Errorf("%w: instance %s: %w", ErrGone, p.InstanceID, err)
		}
		return nil, fmt.Errorf("worker %s: adopt: %w", p.InstanceID, err)
	}
	w := newWorker(spec.withDefaults())
	g := &generation{c: c, socket: p.Socket, token: p.Token, base: p.SeqBase, exited: make(chan struct{})}
	st := c.Attached()
	w.mu.Lock()
	w.gen = g
	w.gens = 1 + generationOf(p.Socket, spec.InstanceID)
	w.pid = st.WorkerPID
	w.sessionPath = p.SessionPath
	w.runOpen = p.RunOpen
	if p.RunOpen {
		w.runDone = make(chan struct{})
		w.startRunTimerLocked()
	}
	restored := StateIdle
	if p.RunOpen {
		restored = StateRunning
	}
	w.machine, _ = WorkerTable.Restore(restored)
	w.skipTo = p.LastSeq
	w.lastSeq = p.LastSeq
	w.delivOpen = p.RunOpen
	w.wg.Add(1)
	go w.readLoop(g)
	if st.Running && !st.StdinClosed {
		w.callLocked(g, pirpc.GetState{}, w.adoptProbe)
	}
	w.mu.Unlock()
	return w, nil
}

// generationOf recovers n from a socket named by socketPath.
func generationOf(socket, id string) int {
	rest, ok := strings.CutPrefix(filepath.Base(socket), id+"-")
	if !ok {
		return 0
	}
	rest, ok = strings.CutSuffix(rest, ".sock")
	if n, err := strconv.Atoi(rest); ok && err == nil {
		return n
	}
	return 0
}

// adoptProbe learns, after the replayed lines, whether a run is in flight:
// it settles a run whose end the previous agent process missed, and makes
// the settle detector wait for the end of one still running.
func (w *Worker) adoptProbe(r *pirpc.Response, seq uint64) []Event {
	st := w.noteState(r)
	if st == nil || w.detector.Phase() != pirpc.PhaseIdle {
		return nil
	}
	if st.IsStreaming {
		w.detector.OnEvent(&pirpc.Event{Type: pirpc.EventAgentStart})
		if !w.runOpen {
			w.openRunLocked()
		}
		return nil
	}
	if w.runOpen {
		return []Event{w.settledLocked(seq, &pirpc.Settle{}, nil, nil)}
	}
	return nil
}

// noteState records what a get_state answer says about the session and
// model, and returns it (nil when it failed).
func (w *Worker) noteState(r *pirpc.Response) *pirpc.State {
	if r.Err() != nil {
		return nil
	}
	var st pirpc.State
	if r.Decode(&st) != nil {
		return nil
	}
	if st.SessionFile != "" {
		w.sessionPath = st.SessionFile
	}
	if st.Model != nil && w.model == "" {
		w.model = st.Model.Provider + "/" + st.Model.ID
	}
	return &st
}

// readLoop turns one shim's records into events.
func (w *Worker) readLoop(g *generation) {
	defer w.wg.Done()
	var held heldAcks
	limit := min(maxHeldAckBytes, g.c.Window()/4)
	for ev := range g.c.Events() {
		hold := held.wait(ev, limit)
		switch ev.Kind {
		case shim.EventLine:
			w.onLine(g, ev, hold)
		case shim.EventGap:
			w.mu.Lock()
			w.emitLocked(g, 0, Event{Seq: g.base + ev.Gap.From, Kind: KindGap})
			w.mu.Unlock()
		case shim.EventExit:
			w.onExit(g, ev.Seq, ev.Exit)
		}
		if len(g.c.Events()) == 0 {
			w.flushAck(false) // the burst is over: one ack for all of it
		}
	}
	w.flushAck(true)
	err := g.c.Err()
	g.c.Close()
	w.mu.Lock()
	defer w.mu.Unlock()
	if g.exit != nil && err == nil && !w.detached {
		if exited := g.c.ShimExited(); exited != nil {
			// The shim finishes once its exit was acknowledged: wait until
			// it is reaped, so that Done (and Stop) mean nothing is left.
			// Detach ends the wait: it must not depend on how soon a shim
			// process goes away.
			w.mu.Unlock()
			select {
			case <-exited:
			case <-w.stopDeliv:
			}
			w.mu.Lock()
		}
	}
	if g.exit != nil || w.detached {
		return
	}
	// The shim vanished without an exit record.
	w.log.Warn().Err(err).Msg("shim connection lost")
	x := &Exit{Code: -1, Lost: true, DuringRun: w.runOpen}
	g.exit = x
	close(g.exited)
	if w.restarting {
		w.fireLocked(OnRestartExit)
		return
	}
	w.fireLocked(OnShimLost)
	w.endLocked()
	w.emitLocked(g, 0, Event{Seq: g.last + 1, Kind: KindExit, Exit: x})
	w.closeQueueLocked()
}

// onLine handles one stdout line; hold says whether its ack may wait.
func (w *Worker) onLine(g *generation, ev shim.Event, hold bool) {
	seq := g.base + ev.Seq
	w.mu.Lock()
	defer w.mu.Unlock()
	g.holdSeq = 0
	if hold {
		g.holdSeq = ev.Seq
	}
	if seq > g.last {
		g.last = seq
	}
	if ev.Overlong != 0 {
		w.log.Warn().Int64("bytes", ev.Overlong).Msg("worker line too long, dropped")
		w.ackLocked(g, ev.Seq)
		return
	}
	rec, err := w.lines.parse(ev.Data)
	if err != nil {
		w.log.Warn().Err(err).Msg("dropped a worker line that is not a pi record")
		w.ackLocked(g, ev.Seq)
		return
	}
	if r := rec.Response; r != nil {
		if len(r.ID) >= len(w.idPrefix) && r.ID[:len(w.idPrefix)] == w.idPrefix {
			// An answer to the worker's own command (maybe from a
			// previous agent process): never forwarded.
			var out []Event
			if h := w.pending[r.ID]; h != nil {
				delete(w.pending, r.ID)
				out = h(r, seq)
			}
			if len(out) == 0 {
				w.ackLocked(g, ev.Seq)
			}
			for i, e := range out {
				var ack uint64
				if i == len(out)-1 {
					ack = ev.Seq
				}
				w.emitLocked(g, ack, e)
			}
			return
		}
		if r.Command == "prompt" && len(r.Data) > 0 {
			w.detector.SetNative() // only newer pi's prompt answers carry data
		}
		if r.Command == "prompt" && !r.Success {
			w.promptSent = false // refused: no run comes of it
		}
		w.emitLocked(g, ev.Seq, Event{Seq: seq, Raw: rec.Raw, Kind: KindResponse})
		if r.Command == "prompt" && r.Success && w.promptSent && !w.runOpen {
			w.checkRunLocked(g)
		}
		return
	}
	w.onEventLocked(g, ev.Seq, seq, rec)
}

// onEventLocked handles one pi event.
func (w *Worker) onEventLocked(g *generation, shimSeq, seq uint64, rec pirpc.Record) {
	e := rec.Event
	out := Event{Seq: seq, Raw: rec.Raw, Kind: string(e.Type)}
	if e.Type == pirpc.EventAgentStart && !w.runOpen {
		w.openRunLocked()
	}
	w.run.Observe(e)
	if e.Type == pirpc.EventToolExecutionStart {
		w.toolCalls++
	}
	if limit := w.budget.observe(e); limit != "" {
		w.breachLocked(g, limit)
	}
	if e.Type == pirpc.EventExtensionUIRequest && e.UIRequest != nil && e.UIRequest.IsDialog() {
		out.UIRequest = w.openDialogLocked(g, e.UIRequest)
	}
	act := w.detector.OnEvent(e)
	if e.Type == pirpc.EventAgentSettled {
		if act.Duplicate {
			w.ackLocked(g, shimSeq) // settled already, by the barrier
			return
		}
		if act.Settled != nil {
			out.Settled = w.settledLocked(seq, act.Settled, rec.Raw, nil).Settled
		}
		act.Settled = nil
	}
	w.emitLocked(g, shimSeq, out)
	w.performLocked(g, act, seq, nil)
}

// performLocked carries out what the settle detector asked for; state is
// the get_state answer that led to act (nil when act came otherwise).
func (w *Worker) performLocked(g *generation, act pirpc.SettleAction, seq uint64, state *pirpc.State) []Event {
	var out []Event
	if act.Barrier != 0 {
		token := act.Barrier
		w.callLocked(g, pirpc.GetState{}, func(r *pirpc.Response, seq uint64) []Event {
			var st pirpc.BarrierState
			s := w.noteState(r)
			if s != nil {
				st = pirpc.BarrierState{IsStreaming: s.IsStreaming, PendingMessageCount: s.PendingMessageCount}
			}
			return w.performLocked(g, w.detector.OnBarrier(token, st), seq, s)
		})
	}
	if act.Wait != 0 {
		if w.waitTimer != nil {
			w.waitTimer.Stop()
		}
		token := act.Wait
		w.waitTimer = time.AfterFunc(act.WaitFor, func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			if !w.finished && w.gen == g {
				w.performLocked(g, w.detector.OnTimeout(token), 0, nil)
			}
		})
	}
	if act.Settled != nil {
		out = append(out, w.settledLocked(seq, act.Settled, nil, state))
	}
	return out
}

// checkRunLocked follows a prompt's answer that came before any run
// started. pi answers a prompt just before its run starts (agent_start
// follows), but a prompt that an extension command (or an input handler)
// took answers only once the command is done, and starts no run: no
// agent_start, no agent_end, nothing to settle. A get_state tells the two
// apart, since pi marks a run streaming in the same step as it answers;
// a prompt that started no run settles at once, as a run of no turn, so
// that whoever waits for it is answered.
func (w *Worker) checkRunLocked(g *generation) {
	w.callLocked(g, pirpc.GetState{}, func(r *pirpc.Response, seq uint64) []Event {
		st := w.noteState(r)
		if st == nil || st.IsStreaming || w.runOpen || !w.promptSent || w.detector.Phase() != pirpc.PhaseIdle {
			return nil
		}
		w.openRunLocked()
		return []Event{w.settledLocked(seq, &pirpc.Settle{}, nil, st)}
	})
}

// openRunLocked starts a run: its figures, its minutes, its budget check.
func (w *Worker) openRunLocked() {
	w.fireLocked(OnRunStarted)
	w.runOpen, w.promptSent = true, false
	w.runDone = make(chan struct{})
	w.run = pirpc.Tally{}
	w.startRunTimerLocked()
	if w.budget.overNow() {
		w.log.Info().Str("limit", w.budget.breached).Msg("run started over budget: aborting")
		w.abortLocked(w.gen)
	}
}

func (w *Worker) startRunTimerLocked() {
	w.runToken++
	limit := w.budget.runLimit()
	if limit <= 0 {
		return
	}
	token, g := w.runToken, w.gen
	w.runTimer = time.AfterFunc(limit, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.runToken == token && w.runOpen && !w.finished {
			if l := w.budget.expire(); l != "" {
				w.breachLocked(g, l)
			}
		}
	})
}

// breachLocked aborts the run at once: the budget is spent.
func (w *Worker) breachLocked(g *generation, limit string) {
	w.log.Warn().Str("limit", limit).Float64("cost", w.budget.cost).Int("turns", w.budget.turns).Msg("budget exceeded: aborting")
	if w.runOpen {
		w.abortLocked(g)
	}
}

func (w *Worker) abortLocked(g *generation) {
	w.callLocked(g, pirpc.Abort{}, func(*pirpc.Response, uint64) []Event { return nil })
}

// settledLocked closes a run: the Settled report, the drift check, and
// the synthetic agent_settled event (raw nil) or pi's own (raw given).
// state is a get_state answer from after the run (the settle barrier's),
// or nil: the drift check needs its own get_state only when there is none
// or it shows a drift (the check's event then takes that answer's seq, so
// that seqs keep increasing). The usual settle so costs one round trip
// through shim and worker, not two.
func (w *Worker) settledLocked(seq uint64, s *pirpc.Settle, raw json.RawMessage, state *pirpc.State) Event {
	limit := w.budget.settle()
	st := &Settled{
		Aborted:           s.Aborted,
		BudgetExceeded:    limit != "",
		BudgetReason:      limit,
		Escalated:         w.escalated,
		Dialogs:           w.outcomes,
		LastAssistantText: w.run.LastAssistantText,
		Stats: Stats{
			Turns:        w.run.Turns,
			ToolCalls:    w.run.ToolCalls,
			Cost:         w.run.Cost,
			FilesChanged: w.run.FilesChanged(),
		},
	}
	if w.run.HasAssistant {
		w.lastText = w.run.LastAssistantText
	}
	w.outcomes, w.escalated = nil, false
	w.run = pirpc.Tally{}
	w.closeRunLocked()
	w.fireLocked(OnRunSettled)
	w.runToken++
	if w.runTimer != nil {
		w.runTimer.Stop()
	}
	if state == nil || w.drifted(state) {
		w.callLocked(w.gen, pirpc.GetState{}, w.driftCheck)
	}
	if raw == nil {
		raw, _ = json.Marshal(struct {
			Type    string `json:"type"`
			Aborted bool   `json:"aborted"`
		}{KindSettled, s.Aborted})
	}
	return Event{Seq: seq, Raw: raw, Kind: KindSettled, Settled: st}
}

// driftCheck compares the model after a settle with the one expected, and
// sets a pinned model back. The drift of a pinned model is reported once
// pi answered the set_model, so that Restored says what happened and a
// get_state after the report shows the pinned model.
func (w *Worker) driftCheck(r *pirpc.Response, seq uint64) []Event {
	st := w.noteState(r)
	if !w.drifted(st) {
		return nil
	}
	now := st.Model.Provider + "/" + st.Model.ID
	d := &Drift{From: w.expectedModel(), To: now}
	w.model = now
	pin := w.pin
	if pin == nil {
		return w.driftEvent(seq, d)
	}
	w.callLocked(w.gen, pirpc.SetModel{Provider: pin.provider, ModelID: pin.id}, func(r *pirpc.Response, seq uint64) []Event {
		if r.Err() != nil {
			w.log.Warn().Err(r.Err()).Str("model", pin.String()).Msg("could not restore the pinned model")
		} else {
			w.model = pin.String()
			d.Restored = true
		}
		return w.driftEvent(seq, d)
	})
	return nil
}

func (w *Worker) driftEvent(seq uint64, d *Drift) []Event {
	w.log.Warn().Str("from", d.From).Str("to", d.To).Bool("restored", d.Restored).Msg("model drift")
	return []Event{{Seq: seq, Kind: KindDrift, Drift: d}}
}

// drifted reports whether a get_state answer (nil when it failed) shows
// another model than the one expected.
func (w *Worker) drifted(st *pirpc.State) bool {
	return st != nil && st.Model != nil && st.Model.Provider+"/"+st.Model.ID != w.expectedModel()
}

// expectedModel is the pinned model, or else the one last seen.
func (w *Worker) expectedModel() string {
	if w.pin != nil {
		return w.pin.String()
	}
	return w.model
}

// openDialogLocked answers a dialog from AutoAnswer, or waits for AnswerUI
// until the dialog's deadline.
func (w *Worker) openDialogLocked(g *generation, u *pirpc.UIRequest) *UIRequest {
	ui := newUIRequest(u)
	if v, ok := autoAnswer(w.spec.AutoAnswer, u.Method, u.Title); ok {
		line, err := dialogResponse(u.ID, u.Method, v, false)
		if err == nil {
			ui.AutoAnswered = true
			w.outcomes = append(w.outcomes, DialogOutcome{u.ID, u.Method, u.Title, OutcomeAuto})
			w.writeAsyncLocked(g, line)
			return ui
		}
		w.log.Warn().Err(err).Str("title", u.Title).Msg("unusable autoAnswer, asking instead")
	}
	d := &dialog{ui: ui}
	d.timer = time.AfterFunc(dialogWait(w.spec.DialogTimeout, ui.Timeout), func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.dialogs[ui.RequestID] != d || w.finished {
			return
		}
		delete(w.dialogs, ui.RequestID)
		w.log.Info().Str("title", ui.Title).Msg("dialog not answered in time: safe default")
		w.outcomes = append(w.outcomes, DialogOutcome{ui.RequestID, ui.Kind, ui.Title, OutcomeTimedOut})
		w.escalated = true
		w.writeAsyncLocked(g, safeDefault(ui.RequestID, ui.Kind))
		w.dialogEndedLocked(g, ui, OutcomeTimedOut)
	})
	w.dialogs[ui.RequestID] = d
	return ui
}

// dialogEndedLocked tells the reader of Events that a dialog ended
// without an answer (outcome OutcomeTimedOut or OutcomeCancelled), so
// that nobody is asked to answer it any more. It has no line of its own:
// it takes the seq of the last line read (the dialog's request or a later
// one), never one a later line will have.
func (w *Worker) dialogEndedLocked(g *generation, ui *UIRequest, outcome string) {
	w.qmu.Lock()
	seq := w.lastSeq
	w.qmu.Unlock()
	if g != nil && g.last > seq {
		seq = g.last
	}
	w.emitLocked(g, 0, Event{Seq: seq, Kind: KindDialogEnded,
		DialogEnded: &DialogOutcome{ui.RequestID, ui.Kind, ui.Title, outcome}})
}

// onExit handles the end of a worker process.
func (w *Worker) onExit(g *generation, shimSeq uint64, st *shim.ExitStatus) {
	w.mu.Lock()
	defer w.mu.Unlock()
	x := &Exit{Code: st.Code, Signal: string(st.Signal), StderrTail: st.StderrTail, DuringRun: w.runOpen}
	g.exit, g.exitSeq = x, shimSeq
	close(g.exited)
	w.stderrTail = st.StderrTail
	if w.restarting {
		w.fireLocked(OnRestartExit)
		// The process that asked is gone: its dialogs cannot be answered.
		for id, d := range w.dialogs {
			d.timer.Stop()
			delete(w.dialogs, id)
			w.outcomes = append(w.outcomes, DialogOutcome{id, d.ui.Kind, d.ui.Title, OutcomeCancelled})
			w.dialogEndedLocked(g, d.ui, OutcomeCancelled)
		}
		w.ackLocked(g, shimSeq) // the restart goes on; nobody needs to know
		return
	}
	if w.machine.State() == StateStopping {
		w.fireLocked(OnStoppedExit)
	} else {
		w.fireLocked(OnExited)
	}
	w.endLocked()
	w.emitLocked(g, shimSeq, Event{Seq: g.base + shimSeq, Kind: KindExit, Exit: x})
	w.closeQueueLocked()
}

// fireLocked moves the lifecycle machine; an event that does not apply
// in the current state is logged and dropped.
func (w *Worker) fireLocked(ev LifecycleEvent) {
	if err := w.machine.Fire(ev); err != nil {
		w.log.Debug().Err(err).Msg("stale lifecycle event")
	}
}

// closeRunLocked marks the run closed and wakes a Stop waiting for it.
func (w *Worker) closeRunLocked() {
	w.runOpen = false
	if w.runDone != nil {
		close(w.runDone)
		w.runDone = nil
	}
}

// endLocked stops the timers of a worker whose process has ended.
func (w *Worker) endLocked() {
	w.finished = true
	w.closeRunLocked()
	for id, d := range w.dialogs {
		d.timer.Stop()
		delete(w.dialogs, id)
	}
	if w.runTimer != nil {
		w.runTimer.Stop()
	}
	if w.waitTimer != nil {
		w.waitTimer.Stop()
	}
}

// callLocked sends one of the worker's own commands; h gets its answer.
func (w *Worker) callLocked(g *generation, cmd pirpc.Command, h handler) {
	w.nextID++
	id := w.idPrefix + strconv.FormatUint(w.nextID, 10)
	line, err := pirpc.EncodeCommand(id, cmd)
	if err != nil {
		w.log.Error().Err(err).Msg("encoding an own command")
		return
	}
	w.pending[id] = h
	w.writeAsyncLocked(g, line)
}

// writeAsyncLocked sends a line at once, in order, without waiting for it
// to reach the worker (the read loop must never wait on the worker's
// stdin): the settle barrier leaves as soon as agent_end is read, with no
// goroutine to schedule first. The shim's answer is not awaited: a write
// fails only when stdin is closed or the worker is gone, which the
// missing answer and the exit report anyway.
func (w *Worker) writeAsyncLocked(g *generation, line []byte) {
	if g == nil {
		return
	}
	if _, err := g.c.Post(append(line, '\n')); err != nil {
		w.log.Debug().Err(err).Msg("write to the worker failed")
	}
}

// emitLocked records an event in the ring and delivers it, or queues it
// for delivery, followed by the acknowledgement of shimSeq (0: none).
func (w *Worker) emitLocked(g *generation, shimSeq uint64, ev Event) {
	w.ring.push(ev)
	hold := holdsAck(g, shimSeq)
	w.qmu.Lock()
	if w.deliverNowLocked(&ev, g, shimSeq, hold) {
		w.qmu.Unlock()
		return
	}
	w.queue.Push(item{ev: ev, hasEv: true, g: g, shimSeq: shimSeq, hold: hold, runOpen: w.runOpen})
	w.qmu.Unlock()
	kick(w.qkick)
}

// holdsAck reports whether the ack of shimSeq may wait: it is the line
// being handled and readLoop found that it may. Caller holds mu.
func holdsAck(g *generation, shimSeq uint64) bool {
	return shimSeq != 0 && g != nil && g.holdSeq == shimSeq
}

// ackLocked acknowledges, after the events before it, a line that makes
// no event.
func (w *Worker) ackLocked(g *generation, shimSeq uint64) {
	hold := holdsAck(g, shimSeq)
	w.qmu.Lock()
	if w.deliverNowLocked(nil, g, shimSeq, hold) {
		w.qmu.Unlock()
		return
	}
	w.queue.Push(item{g: g, shimSeq: shimSeq, hold: hold, runOpen: w.runOpen})
	w.qmu.Unlock()
	kick(w.qkick)
}

// deliverNowLocked hands ev (nil: none) to a reader waiting on Events
// when nothing is queued before it, and notes the ack of shimSeq; it
// reports false when the item must go through the queue instead. Most
// events find the queue empty and the daemon waiting: they skip the
// handoff to deliver, a goroutine wakeup per line on the round trip.
// Caller holds qmu.
func (w *Worker) deliverNowLocked(ev *Event, g *generation, shimSeq uint64, hold bool) bool {
	if w.queue.Len() > 0 || w.delivBusy || w.delivClosed || (shimSeq != 0 && w.ackSeq != 0 && w.ackGen != g) {
		return false
	}
	if ev != nil && ev.Seq > w.skipTo {
		select {
		case w.events <- *ev:
		default:
			return false
		}
		w.lastSeq, w.delivOpen = ev.Seq, w.runOpen
	}
	if shimSeq != 0 {
		w.owedAckLocked(g, shimSeq, hold) // same generation: nothing to send first
	}
	return true
}

// owedAckLocked notes that shimSeq of g is delivered, its ack allowed to
// wait if hold; it returns an ack owed to another generation, to be sent
// first. The owed ack may wait only while every line it covers may: one
// line that may not makes the next flush send it. When an ack starts to
// wait, holdTimer is armed, so that a stream that pauses after an update
// still gets it out. Caller holds qmu.
func (w *Worker) owedAckLocked(g *generation, shimSeq uint64, hold bool) (*generation, uint64) {
	var prevGen *generation
	var prevSeq uint64
	if w.ackSeq != 0 && w.ackGen != g {
		prevGen, prevSeq = w.ackGen, w.ackSeq
		w.ackSeq = 0
	}
	if hold && w.ackSeq == 0 {
		w.holdTimer.Reset(w.holdFor)
	}
	w.ackHold = hold && (w.ackSeq == 0 || w.ackHold)
	w.ackGen, w.ackSeq = g, shimSeq
	return prevGen, prevSeq
}

// flushAck sends the ack owed for delivered lines, if any, unless it may
// wait and force is false. Acks are cumulative, so one covers a whole
// burst, and a held one the updates before it.
func (w *Worker) flushAck(force bool) {
	w.qmu.Lock()
	g, seq := w.ackGen, w.ackSeq
	if seq == 0 || (w.ackHold && !force) {
		w.qmu.Unlock()
		return
	}
	w.ackGen, w.ackSeq, w.ackHold = nil, 0, false
	w.qmu.Unlock()
	w.sendAck(g, seq)
}

// sendAck acknowledges every line of g through seq to its shim.
func (w *Worker) sendAck(g *generation, seq uint64) {
	g.c.Ack(seq) // fails only once the shim is gone
	if w.onAck != nil {
		w.onAck(seq)
	}
}

func (w *Worker) closeQueueLocked() {
	w.qmu.Lock()
	w.queue.Push(item{close: true})
	w.qmu.Unlock()
	kick(w.qkick)
}

func kick(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// deliver moves queued events to Events, acknowledging them to their shim
// once delivered. It closes Events after the last event, or on Detach.
//
// Acks are cumulative, so deliver sends one for the latest delivered line
// before it waits (for more of the queue, or for a slow reader of Events)
// and before it returns, rather than one per line: a prompt's dozen events
// cost the shim one ack instead of a dozen socket writes and wakeups on
// the round trip's path. The one ack deliver may wait holding is one that
// heldAcks lets wait (after message_updates, within its bounds and
// holdTimer's time).
func (w *Worker) deliver() {
	defer close(w.delivDone)
	defer func() {
		w.qmu.Lock()
		w.delivClosed = true
		w.qmu.Unlock()
		close(w.events)
		w.holdTimer.Stop()
		w.flushAck(true)
	}()
	for {
		w.qmu.Lock()
		w.delivBusy = false
		if w.queue.Len() == 0 {
			w.qmu.Unlock()
			w.flushAck(false)
			select {
			case <-w.qkick:
				continue
			case <-w.stopDeliv:
				return
			}
		}
		it := w.queue.Pop()
		w.delivBusy = true
		w.qmu.Unlock()
		if it.close {
			return
		}
		if it.hasEv && it.ev.Seq > w.skipTo {
			select {
			case w.events <- it.ev:
			default:
				w.flushAck(false) // the reader is behind: hold no more than heldAcks allows meanwhile
				select {
				case w.events <- it.ev:
				case <-w.stopDeliv:
					return
				}
			}
			w.qmu.Lock()
			w.lastSeq, w.delivOpen = it.ev.Seq, it.runOpen
			w.qmu.Unlock()
		}
		if it.shimSeq != 0 {
			w.qmu.Lock()
			prevGen, prevSeq := w.owedAckLocked(it.g, it.shimSeq, it.hold)
			w.qmu.Unlock()
			if prevSeq != 0 {
				w.sendAck(prevGen, prevSeq)
			}
		}
	}
}

// shutdown releases a Worker that never got going: its shim (if any)
// finishes once the exit is acknowledged.
func (w *Worker) shutdown() {
	w.mu.Lock()
	w.detached = true
	g := w.gen
	w.mu.Unlock()
	close(w.stopDeliv)
	<-w.delivDone
	if g != nil {
		if g.exitSeq != 0 {
			g.c.Ack(g.exitSeq)
		} else {
			g.c.Close()
		}
	}
	w.wg.Wait()
}
