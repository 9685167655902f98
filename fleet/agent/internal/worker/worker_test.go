//go:build unix

package worker

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"example.com/pifleet/internal/pitest"
)

// forKinds runs f against the scripted worker and the real pi (skipped
// with pitest.SkipMessage when PIFLEET_PI is unset).
func forKinds(t *testing.T, f func(t *testing.T, kind pitest.Kind)) {
	for _, kind := range pitest.Kinds() {
		t.Run(strings.ReplaceAll(kind.String(), " ", "_"), func(t *testing.T) {
			if kind == pitest.RealPi {
				pitest.Find(t)
			}
			f(t, kind)
		})
	}
}

func TestSettleAfterToolCall(t *testing.T) {
	forKinds(t, func(t *testing.T, kind pitest.Kind) {
		w := start(t, piSpec(t, kind, pitest.Options{}))
		s := newStream(t, w)
		snap := w.Snapshot()
		if snap.SessionPath == "" || snap.Model != "faux/faux-1" || snap.State != StateIdle || snap.Pid <= 0 {
			t.Fatalf("snapshot after Start = %+v, want a session path, faux/faux-1, idle, a pid", snap)
		}
		prompt(t, w, "p1", "bash: echo hello")
		evs := s.until(settled)
		if count(evs, responseTo("p1")) != 1 {
			t.Errorf("prompt response forwarded %d times, want 1; events: %s", count(evs, responseTo("p1")), kinds(evs))
		}
		order := []string{"agent_start", "tool_execution_start", "tool_execution_end", "agent_end", KindSettled}
		i := 0
		for _, ev := range evs {
			if i < len(order) && ev.Kind == order[i] {
				i++
			}
		}
		if i != len(order) {
			t.Errorf("events %s do not contain %v in order", kinds(evs), order)
		}
		last := evs[len(evs)-1]
		var raw struct {
			Type    string `json:"type"`
			Aborted *bool  `json:"aborted"`
		}
		if err := json.Unmarshal(last.Raw, &raw); err != nil || raw.Type != "agent_settled" || raw.Aborted == nil || *raw.Aborted {
			t.Errorf("settled raw = %s, want agent_settled aborted:false", last.Raw)
		}
		st := last.Settled
		if st.Aborted || st.BudgetExceeded || st.Stats.ToolCalls != 1 || st.Stats.Turns != 2 ||
			!strings.Contains(st.LastAssistantText, "bash=hello") {
			t.Errorf("Settled = %+v, want 1 tool call, 2 turns, text about bash=hello", st)
		}
		for _, ev := range evs {
			if strings.Contains(string(ev.Raw), `"id":"pifleet-`) {
				t.Errorf("the worker's own response was forwarded: %s", ev.Raw)
			}
		}
		// A later command: answered, and no second settle for the run.
		send(t, w, map[string]any{"id": "s1", "type": "get_state"})
		more := s.until(responseTo("s1"))
		if n := count(more, settled) + count(more, isKind(KindDrift)); n != 0 {
			t.Errorf("extra settle or drift after the run: %s", kinds(more))
		}
		if snap := w.Snapshot(); snap.State != StateIdle || snap.Busy || snap.ToolCalls != 1 || snap.Turns != 2 {
			t.Errorf("snapshot after the run = %+v", snap)
		}
		if forced, exit := stopAndDrain(t, w, s); forced || exit.Code != 0 || exit.DuringRun {
			t.Errorf("Stop of an idle worker: forced %v, exit %+v; want a clean exit", forced, exit)
		}
		if st := w.Snapshot().State; st != StateStopped {
			t.Errorf("state after Stop = %s, want stopped", st)
		}
	})
}

func TestBudgetCost(t *testing.T) {
	forKinds(t, func(t *testing.T, kind pitest.Kind) {
		spec := piSpec(t, kind, pitest.Options{Env: []string{"PIFLEET_FAUX_COST=2"}})
		spec.Budget = Budget{MaxCost: 3}
		w := start(t, spec)
		s := newStream(t, w)
		prompt(t, w, "p1", "bash: echo one")
		st := s.until(settled)
		got := st[len(st)-1].Settled
		if !got.BudgetExceeded || got.BudgetReason != LimitCost || got.Stats.Cost != 4 {
			t.Errorf("Settled = %+v, want budget exceeded (maxCost) at cost 4", got)
		}
		if snap := w.Snapshot(); snap.BudgetExceeded != LimitCost {
			t.Errorf("snapshot budget = %q", snap.BudgetExceeded)
		}
		stopAndDrain(t, w, s)
	})
}

func TestBudgetTurnsAbortsWithinATurn(t *testing.T) {
	forKinds(t, func(t *testing.T, kind pitest.Kind) {
		spec := piSpec(t, kind, pitest.Options{Env: []string{"PIFLEET_FAUX_DELAY_MS=200"}})
		spec.Budget = Budget{MaxTurns: 1}
		w := start(t, spec)
		s := newStream(t, w)
		prompt(t, w, "p1", "bash: echo one")
		evs := s.until(settled)
		got := evs[len(evs)-1].Settled
		if !got.BudgetExceeded || got.BudgetReason != LimitTurns || !got.Aborted {
			for _, ev := range evs {
				t.Logf("%d %s", ev.Seq, ev.Raw)
			}
			t.Errorf("Settled = %+v, want an aborted run over maxTurns", got)
		}
		stopAndDrain(t, w, s)
	})
}

func TestBudgetMinutes(t *testing.T) {
	spec := piSpec(t, pitest.Scripted, pitest.Options{})
	// 1.5 s: a quick run stays well within it even on a loaded machine
	// under -race (with 60 ms, one in CI did not).
	spec.Budget = Budget{MaxMinutes: 0.025}
	w := start(t, spec)
	s := newStream(t, w)
	prompt(t, w, "p1", "delay: 60000\nsay: far too slow")
	evs := s.until(settled)
	got := evs[len(evs)-1].Settled
	if !got.BudgetExceeded || got.BudgetReason != LimitMinutes || !got.Aborted {
		t.Errorf("Settled = %+v, want an aborted run over maxMinutes", got)
	}
	// Minutes are per run: the next run starts with a clean slate.
	prompt(t, w, "p2", "say: quick")
	evs = s.until(settled)
	if got := evs[len(evs)-1].Settled; got.BudgetExceeded || got.Aborted {
		t.Errorf("next run Settled = %+v, want within budget", got)
	}
	stopAndDrain(t, w, s)
}

func TestDialogs(t *testing.T) {
	forKinds(t, func(t *testing.T, kind pitest.Kind) {
		notified := func(ev Event) bool {
			return ev.Kind == "extension_ui_request" && strings.Contains(string(ev.Raw), `"method":"notify"`)
		}
		verdict := func(evs []Event) string {
			raw := string(evs[len(evs)-1].Raw)
			if strings.Contains(raw, "faux-ui: confirmed") {
				return "confirmed"
			}
			return "declined"
		}
		t.Run("answered", func(t *testing.T) {
			w := start(t, piSpec(t, kind, pitest.Options{}))
			s := newStream(t, w)
			prompt(t, w, "p1", "/faux-ui")
			evs := s.until(func(ev Event) bool { return ev.UIRequest != nil })
			ui := evs[len(evs)-1].UIRequest
			if ui.Kind != "confirm" || ui.Title != "faux-ui" || ui.Message != "Proceed?" || ui.AutoAnswered {
				t.Fatalf("UIRequest = %+v", ui)
			}
			if err := w.AnswerUI(ui.RequestID, true, false); err != nil {
				t.Fatal(err)
			}
			if err := w.AnswerUI(ui.RequestID, true, false); !errors.Is(err, ErrUnknownDialog) {
				t.Errorf("second answer: %v, want ErrUnknownDialog", err)
			}
			if v := verdict(s.until(notified)); v != "confirmed" {
				t.Errorf("worker saw %s, want confirmed", v)
			}
			prompt(t, w, "p2", "say: after")
			evs = s.until(settled)
			st := evs[len(evs)-1].Settled
			if st.Escalated || len(st.Dialogs) != 1 || st.Dialogs[0].Outcome != OutcomeAnswered {
				t.Errorf("Settled dialogs = %+v escalated %v, want one answered", st.Dialogs, st.Escalated)
			}
			stopAndDrain(t, w, s)
		})
		t.Run("auto-answered", func(t *testing.T) {
			spec := piSpec(t, kind, pitest.Options{})
			spec.AutoAnswer = map[string]any{"confirm:faux-ui": true}
			w := start(t, spec)
			s := newStream(t, w)
			prompt(t, w, "p1", "/faux-ui")
			evs := s.until(func(ev Event) bool { return ev.UIRequest != nil })
			if ui := evs[len(evs)-1].UIRequest; !ui.AutoAnswered {
				t.Errorf("UIRequest = %+v, want AutoAnswered", ui)
			}
			if v := verdict(s.until(notified)); v != "confirmed" {
				t.Errorf("worker saw %s, want confirmed", v)
			}
			stopAndDrain(t, w, s)
		})
		t.Run("timed out", func(t *testing.T) {
			spec := piSpec(t, kind, pitest.Options{})
			spec.DialogTimeout = 50 * time.Millisecond
			w := start(t, spec)
			s := newStream(t, w)
			prompt(t, w, "p1", "/faux-ui")
			if v := verdict(s.until(notified)); v != "declined" {
				t.Errorf("worker saw %s, want declined (the safe default)", v)
			}
			prompt(t, w, "p2", "say: after")
			evs := s.until(settled)
			st := evs[len(evs)-1].Settled
			if !st.Escalated || len(st.Dialogs) != 1 || st.Dialogs[0].Outcome != OutcomeTimedOut {
				t.Errorf("Settled = %+v, want escalated with one timed-out dialog", st)
			}
			stopAndDrain(t, w, s)
		})
	})
}

func TestCrashMidTask(t *testing.T) {
	forKinds(t, func(t *testing.T, kind pitest.Kind) {
		w := start(t, piSpec(t, kind, pitest.Options{}))
		s := newStream(t, w)
		cmd, running := toolSleep(t)
		prompt(t, w, "p1", "bash: "+cmd)
		running()
		if err := syscall.Kill(w.Snapshot().Pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		evs := s.drain()
		waitDone(t, w)
		x := evs[len(evs)-1].Exit
		if x == nil || x.Signal != "KILL" || !x.DuringRun {
			t.Fatalf("last event %+v, want an Exit by SIGKILL during the run", evs[len(evs)-1])
		}
		if n := count(evs, settled); n != 0 {
			t.Errorf("%d settles for a crashed run, want 0", n)
		}
		if st := w.Snapshot().State; st != StateExited {
			t.Errorf("state = %s, want exited", st)
		}
		if forced, err := w.Stop(t.Context()); forced || err != nil {
			t.Errorf("Stop after the exit = %v, %v; want false, nil", forced, err)
		}
	})
	t.Run("stderr tail", func(t *testing.T) {
		w := start(t, helperSpec(t, "crasher"))
		s := newStream(t, w)
		prompt(t, w, "p1", "anything")
		evs := s.drain()
		waitDone(t, w)
		x := evs[len(evs)-1].Exit
		if x == nil || x.Code != 3 || !x.DuringRun || !strings.Contains(x.StderrTail, "boom: the worker crashed") {
			t.Fatalf("last event %+v, want Exit code 3 during the run with the stderr tail", evs[len(evs)-1])
		}
	})
}

func TestStopBusyWorkerLeavesNoOrphan(t *testing.T) {
	forKinds(t, func(t *testing.T, kind pitest.Kind) {
		w := start(t, piSpec(t, kind, pitest.Options{}))
		s := newStream(t, w)
		wit := newWitness(t)
		pidFile := filepath.Join(t.TempDir(), "pid")
		prompt(t, w, "p1", "bash: sh -c 'echo $$ >"+pidFile+"; exec sleep 300 3>"+wit.path+"' & wait")
		wit.wait(t, wit.opened, "opened by the tool")
		forced, exit := stopAndDrain(t, w, s)
		if forced {
			t.Errorf("Stop of a cooperative busy worker was forced")
		}
		if exit.DuringRun {
			t.Errorf("exit %+v during a run: the abort should have ended it first", exit)
		}
		var settles int
		for _, ev := range s.seen {
			if ev.Settled != nil {
				settles++
				if !ev.Settled.Aborted {
					t.Errorf("the stopped run settled without aborted: %+v", ev.Settled)
				}
			}
		}
		if settles != 1 {
			t.Errorf("%d settles, want 1 (the aborted run)", settles)
		}
		wit.wait(t, wit.gone, "released (the tool's process is still alive)")
		b, err := os.ReadFile(pidFile)
		if err != nil {
			t.Fatal(err)
		}
		if pid, _ := strconv.Atoi(strings.TrimSpace(string(b))); pid <= 0 || alive(pid) {
			t.Errorf("tool process %q is still alive", b)
		}
	})
}

// toolSleep is a long bash tool command that reports its pid on a FIFO;
// the returned func waits for the tool to run. pi runs tools in process
// groups of their own, so a worker killed by SIGKILL (which cannot clean
// up) leaves its tool behind: the test ends it itself.
func toolSleep(t *testing.T) (command string, running func()) {
	fifo := filepath.Join(t.TempDir(), "pid")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	var pid int
	t.Cleanup(func() {
		if pid > 0 && alive(pid) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return "echo $$ >" + fifo + "; exec sleep 300", func() {
		b, err := os.ReadFile(fifo) // until the tool wrote its pid
		if err != nil {
			t.Fatal(err)
		}
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
}

// A Stop right after a prompt, before the run's agent_start was read,
// still aborts the run: closing stdin alone would leave the tools the
// worker already started running.
func TestStopBeforeAgentStartAborts(t *testing.T) {
	spec := helperSpec(t, "unseen")
	wit := newWitness(t)
	spec.Env = append(spec.Env, "WITNESS="+wit.path)
	w := start(t, spec)
	s := newStream(t, w)
	prompt(t, w, "p1", "work")
	wit.wait(t, wit.opened, "opened by the worker's tool")
	if _, exit := stopAndDrain(t, w, s); exit == nil {
		t.Fatal("no exit")
	}
	wit.wait(t, wit.gone, "released: the tool survived the stop (no abort was sent)")
}

func TestStopForced(t *testing.T) {
	spec := helperSpec(t, "stubborn")
	wit := newWitness(t)
	spec.Env = append(spec.Env, "WITNESS="+wit.path)
	w := start(t, spec)
	wit.wait(t, wit.opened, "opened by the worker's child")
	s := newStream(t, w)
	prompt(t, w, "p1", "work") // a run the worker never ends, nor aborts
	s.until(isKind("agent_start"))
	forced, exit := stopAndDrain(t, w, s)
	if !forced || exit.Signal != "KILL" || !exit.DuringRun {
		t.Errorf("Stop = forced %v, exit %+v; want forced, SIGKILL, during the run", forced, exit)
	}
	wit.wait(t, wit.gone, "released: the worker's child survived the forced stop")
}

func TestRestartKeepsHistory(t *testing.T) {
	forKinds(t, func(t *testing.T, kind pitest.Kind) {
		spec := piSpec(t, kind, pitest.Options{})
		w := start(t, spec)
		s := newStream(t, w)
		prompt(t, w, "p1", "say: remember the walrus")
		s.until(settled)
		before := w.Snapshot()
		lastSeq := s.seen[len(s.seen)-1].Seq

		spec.Command = append(spec.Command, "--thinking", "off") // "new resources"
		if err := w.Restart(t.Context(), spec); err != nil {
			t.Fatalf("Restart: %v", err)
		}
		after := w.Snapshot()
		if after.SessionPath != before.SessionPath || after.Pid == before.Pid || after.State != StateIdle {
			t.Errorf("after Restart %+v, before %+v: want the same session, a new pid, idle", after, before)
		}
		checkKeptAcross(t, w, s, lastSeq, "Restart")
	})
}

// A Restart ends the dialogs of the process that asked: nobody can answer
// them any more, so the stream says so (DialogEnded, cancelled) before
// the new process starts, and AnswerUI no longer knows them.
func TestRestartEndsTheDialogsOfTheProcessThatAsked(t *testing.T) {
	forKinds(t, func(t *testing.T, kind pitest.Kind) {
		spec := piSpec(t, kind, pitest.Options{})
		w := start(t, spec)
		s := newStream(t, w)
		prompt(t, w, "p1", "/faux-ui")
		evs := s.until(func(ev Event) bool { return ev.UIRequest != nil })
		ui := evs[len(evs)-1].UIRequest
		if err := w.Restart(t.Context(), spec); err != nil {
			t.Fatalf("Restart: %v", err)
		}
		evs = s.until(func(ev Event) bool { return ev.DialogEnded != nil })
		want := DialogOutcome{ui.RequestID, "confirm", "faux-ui", OutcomeCancelled}
		if got := *evs[len(evs)-1].DialogEnded; got != want {
			t.Errorf("DialogEnded %+v, want %+v", got, want)
		}
		if err := w.AnswerUI(ui.RequestID, true, false); !errors.Is(err, ErrUnknownDialog) {
			t.Errorf("answer to the old process's dialog: %v, want ErrUnknownDialog", err)
		}
		stopAndDrain(t, w, s)
	})
}

// A Restart whose new command dies before it is ready brings the previous
// one back on the same session: *RestartError with Restored, no exit
// reported, the seqs still increasing, the history kept.
func TestRestartThatCannotStartRestoresThePrevious(t *testing.T) {
	forKinds(t, func(t *testing.T, kind pitest.Kind) {
		spec := piSpec(t, kind, pitest.Options{})
		w := start(t, spec)
		s := newStream(t, w)
		prompt(t, w, "p1", "say: remember the walrus")
		s.until(settled)
		before := w.Snapshot()
		lastSeq := s.seen[len(s.seen)-1].Seq

		broken := spec
		broken.Command = []string{"/bin/sh", "-c", "echo this worker cannot start >&2; exit 3"}
		err := w.Restart(t.Context(), broken)
		var re *RestartError
		if !errors.As(err, &re) || !re.Restored || !strings.Contains(err.Error(), "cannot start") {
			t.Fatalf("Restart = %v, want a restored *RestartError naming the failure", err)
		}
		after := w.Snapshot()
		if after.SessionPath != before.SessionPath || after.State != StateIdle {
			t.Errorf("after the failed Restart %+v, before %+v: want the same session, idle", after, before)
		}
		checkKeptAcross(t, w, s, lastSeq, "the failed Restart")
	})
}

func TestAdoptAfterDetach(t *testing.T) {
	forKinds(t, func(t *testing.T, kind pitest.Kind) {
		spec := piSpec(t, kind, pitest.Options{Env: []string{"PIFLEET_FAUX_DELAY_MS=20"}})
		w := start(t, spec)
		s := newStream(t, w)
		prompt(t, w, "p1", "say: "+strings.Repeat("adopted ", 8))
		s.until(isKind("agent_start"))
		w.Detach()
		p := w.Persisted()
		first := s.drain()
		if p.LastSeq != s.seen[len(s.seen)-1].Seq || !p.RunOpen || p.SessionPath == "" {
			t.Fatalf("Persisted = %+v after events up to %d (%d after detach)", p, s.seen[len(s.seen)-1].Seq, len(first))
		}

		w2, err := Adopt(t.Context(), spec, p)
		if err != nil {
			t.Fatalf("Adopt: %v", err)
		}
		s2 := newStream(t, w2)
		evs := s2.until(settled)
		if evs[0].Seq <= p.LastSeq {
			t.Errorf("first event after Adopt has seq %d <= %d: delivered twice", evs[0].Seq, p.LastSeq)
		}
		if n := count(evs, isKind("agent_start")); n != 0 {
			t.Errorf("agent_start delivered again after Adopt")
		}
		st := evs[len(evs)-1].Settled
		if st.Aborted || !strings.Contains(st.LastAssistantText, "adopted") {
			t.Errorf("Settled after Adopt = %+v", st)
		}
		send(t, w2, map[string]any{"id": "s1", "type": "get_state"})
		if more := s2.until(responseTo("s1")); count(more, settled) != 0 {
			t.Errorf("second settle after Adopt: %s", kinds(more))
		}
		stopAndDrain(t, w2, s2)
		waitShimGone(t, w)
	})
}

func TestAdoptMissedSettle(t *testing.T) {
	// The previous agent process saw the run start and went away; the run
	// ended while nobody was attached. Adopt still settles it, once.
	spec := piSpec(t, pitest.Scripted, pitest.Options{})
	w := start(t, spec)
	s := newStream(t, w)
	prompt(t, w, "p1", "say: done alone")
	s.until(isKind("agent_start"))
	w.Detach()
	s.drain()
	p := w.Persisted()
	w2, err := Adopt(t.Context(), spec, p)
	if err != nil {
		t.Fatal(err)
	}
	s2 := newStream(t, w2)
	evs := s2.until(settled)
	if st := evs[len(evs)-1].Settled; st.LastAssistantText != "done alone" {
		t.Errorf("Settled = %+v", st)
	}
	send(t, w2, map[string]any{"id": "s1", "type": "get_state"})
	if more := s2.until(responseTo("s1")); count(more, settled) != 0 {
		t.Errorf("second settle: %s", kinds(more))
	}
	stopAndDrain(t, w2, s2)
	waitShimGone(t, w)
}

func TestAdoptExitedWorker(t *testing.T) {
	spec := piSpec(t, pitest.Scripted, pitest.Options{})
	w := start(t, spec)
	s := newStream(t, w)
	cmd, running := toolSleep(t)
	prompt(t, w, "p1", "bash: "+cmd)
	running()
	pid := w.Snapshot().Pid
	w.Detach()
	s.drain()
	p := w.Persisted()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	w2, err := Adopt(t.Context(), spec, p)
	if err != nil {
		t.Fatal(err)
	}
	evs := newStream(t, w2).drain()
	waitDone(t, w2)
	waitShimGone(t, w)
	x := evs[len(evs)-1].Exit
	if x == nil || x.Signal != "KILL" || !x.DuringRun {
		t.Errorf("last event after Adopt = %+v, want the Exit during the run", evs[len(evs)-1])
	}
}

func TestAdoptGone(t *testing.T) {
	spec := helperSpec(t, "stubborn")
	_, err := Adopt(t.Context(), spec, Persisted{InstanceID: spec.InstanceID, Socket: filepath.Join(spec.StateDir, "nobody.sock"), Token: "t"})
	if !errors.Is(err, ErrGone) {
		t.Errorf("Adopt without a shim: %v, want ErrGone", err)
	}
}

func TestModelPin(t *testing.T) {
	w := start(t, piSpec(t, pitest.Scripted, pitest.Options{}))
	s := newStream(t, w)
	w.SetModelPin("faux", "faux-2", true)
	for _, typ := range []string{"set_model", "cycle_model"} {
		if err := w.Send(json.RawMessage(`{"type":"` + typ + `","provider":"faux","modelId":"faux-1"}`)); !errors.Is(err, ErrModelPinned) {
			t.Errorf("Send(%s) while pinned = %v, want ErrModelPinned", typ, err)
		}
	}
	prompt(t, w, "p1", "say: hi")
	// The worker has no faux-2: the set_model back fails, and the drift
	// says so (fleet's TestPinnedModelChangedByAnExtensionIsSetBack sees a
	// real pi set back).
	evs := s.until(isKind(KindDrift))
	d := evs[len(evs)-1].Drift
	if d.From != "faux/faux-2" || d.To != "faux/faux-1" || d.Restored {
		t.Errorf("Drift = %+v, want faux/faux-2 → faux/faux-1, not restored", d)
	}
	w.SetModelPin("", "", false)
	send(t, w, map[string]any{"id": "m", "type": "set_model", "provider": "faux", "modelId": "faux-1"})
	s.until(responseTo("m"))
	stopAndDrain(t, w, s)
}

func TestStartFailure(t *testing.T) {
	spec := helperSpec(t, "stubborn")
	spec.Command = []string{"/bin/sh", "-c", "echo cannot start >&2; exit 7"}
	_, err := Start(t.Context(), spec)
	var se *StartError
	if !errors.As(err, &se) || se.Exit.Code != 7 || !strings.Contains(se.Exit.StderrTail, "cannot start") {
		t.Errorf("Start = %v, want a StartError with code 7 and the stderr tail", err)
	}
	if _, err := Start(t.Context(), Spec{}); !errors.Is(err, ErrInvalidSpec) {
		t.Errorf("Start(Spec{}) = %v, want ErrInvalidSpec", err)
	}
}

func TestSendBadCommand(t *testing.T) {
	w := start(t, helperSpec(t, "stubborn"))
	s := newStream(t, w)
	for _, raw := range []string{`nope`, `[1]`, `{"id":"x"}`, `{"type":3}`} {
		if err := w.Send(json.RawMessage(raw)); !errors.Is(err, ErrBadCommand) {
			t.Errorf("Send(%s) = %v, want ErrBadCommand", raw, err)
		}
	}
	stopAndDrain(t, w, s)
}

// A prompt whose run starts only once the stop's abort reached the worker
// (pi had queued it): the run starts and settles while stopping, and the
// stop ends gracefully.
func TestARunStartingWhileStoppingSettles(t *testing.T) {
	spec := helperSpec(t, "late")
	// A race-enabled helper otherwise sleeps a second at exit, past the
	// grace.
	spec.Env = append(spec.Env, "GORACE=atexit_sleep_ms=0")
	w := start(t, spec)
	s := newStream(t, w)
	prompt(t, w, "p1", "work")
	s.until(responseTo("p1"))
	forced, exit := stopAndDrain(t, w, s)
	if forced || exit == nil || exit.Code != 0 {
		t.Fatalf("Stop = forced %v, exit %+v; want a graceful exit 0; seen %s", forced, exit, kinds(s.seen))
	}
	if n := count(s.seen, isKind("agent_start")); n != 1 {
		t.Errorf("%d agent_start, want the late run's one", n)
	}
	if n := count(s.seen, settled); n != 1 {
		t.Errorf("%d settles, want 1 (the late run)", n)
	}
	if st := w.Snapshot().State; st != StateStopped {
		t.Errorf("state = %s, want stopped", st)
	}
}

// checkKeptAcross checks that a worker kept its session across what (a
// Restart, after prompt p1 "say: remember the walrus" settled): its
// history is there, no exit was reported, seqs went on increasing past
// lastSeq and a new prompt runs; then it stops the worker.
func checkKeptAcross(t *testing.T, w *Worker, s *stream, lastSeq uint64, what string) {
	t.Helper()
	send(t, w, map[string]any{"id": "m1", "type": "get_messages"})
	evs := s.until(responseTo("m1"))
	if !strings.Contains(string(evs[len(evs)-1].Raw), "remember the walrus") {
		t.Errorf("get_messages after %s lost the history: %s", what, evs[len(evs)-1].Raw)
	}
	if n := count(evs, isKind(KindExit)); n != 0 {
		t.Errorf("%s reported %d exits", what, n)
	}
	if evs[0].Seq <= lastSeq {
		t.Errorf("seq went back from %d to %d across %s", lastSeq, evs[0].Seq, what)
	}
	prompt(t, w, "p2", "say: still here")
	if got := s.until(settled); got[len(got)-1].Settled.LastAssistantText != "still here" {
		t.Errorf("run after %s settled with %+v", what, got[len(got)-1].Settled)
	}
	stopAndDrain(t, w, s)
}
