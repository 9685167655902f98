package fleet_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"example.com/pifleet/fleet"
	"example.com/pifleet/transport"
)

// A stop the agent refuses (an error other than unknown_instance, as when
// the delivery before a task_accept with stop fails) is returned to the
// caller with the agent's code and changes nothing: the instance stays
// stopping, a second Stop is refused, and the stop is sent again after
// the next reconnect, whose answer ends the instance.
func TestAStopTheAgentRefusesIsSentAgainAfterTheReconnect(t *testing.T) {
	tf, peer, proxy := proxiedFleet(t)
	inst := spawn(t, tf, "box")
	var refuse atomic.Bool
	refuse.Store(true)
	var stops atomic.Int32
	peer.mu.Lock()
	peer.script = func(_ *transport.Conn, fr transport.Frame, reply func(transport.Frame)) bool {
		if _, ok := fr.(*transport.StopFrame); ok {
			stops.Add(1)
			if refuse.Load() {
				reply(&transport.ErrorFrame{Code: "merge_conflict", Message: "conflict in main.go"})
				return true
			}
		}
		return false
	}
	peer.mu.Unlock()

	err := inst.Stop(t.Context())
	if err == nil || !strings.Contains(err.Error(), "merge_conflict") {
		t.Fatalf("Stop = %v, want the agent's merge_conflict", err)
	}
	if got := inst.State(); got != fleet.StateStopping {
		t.Fatalf("after the refusal: %s, want stopping", got)
	}
	var se *fleet.StateError
	if err := inst.Stop(t.Context()); !errors.As(err, &se) {
		t.Errorf("a second Stop = %v, want a *StateError (already stopping)", err)
	}

	refuse.Store(false)
	proxy.Cut()
	tf.waitInstance(t, inst.ID(), fleet.StateStopped)
	if n := stops.Load(); n != 2 {
		t.Errorf("the agent got %d stops, want 2 (the refused one, and the one sent again after the reconnect)", n)
	}
	for _, st := range tf.Status(t.Context()).Instances {
		if st.InstanceID == inst.ID() && st.EndReason != "" {
			t.Errorf("end reason %q, want none (stopped as asked)", st.EndReason)
		}
	}
}

// A worker that dies while an RPC waits for its response releases the
// caller at once with a *WorkerGoneError saying how it ended (as the
// agent's exit notice tells), and the session file the notice names is
// kept.
func TestAnRPCWaitingWhenTheWorkerDiesGetsWorkerGone(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	tf := newTestFleet(t, peer)
	inst := spawn(t, tf, "box")
	peer.mu.Lock()
	peer.holdGetState = true
	peer.mu.Unlock()
	errc := make(chan error, 1)
	go func() {
		_, err := inst.GetState(context.WithoutCancel(t.Context()))
		errc <- err
	}()
	<-peer.getStateHeld

	code := 3.0
	peer.send(peer.conn(), &transport.WorkerExitedFrame{InstanceID: inst.ID(), ExitCode: &code, Expected: true,
		State: transport.InstanceExited, SessionPath: "/s/w1.jsonl"})
	var err error
	select {
	case err = <-errc:
	case <-time.After(10 * time.Second):
		t.Fatal("GetState still waits after the worker died")
	}
	var gone *fleet.WorkerGoneError
	if !errors.As(err, &gone) || gone.InstanceID != inst.ID() || gone.Reason != "exited with code 3 (stopped by another server)" {
		t.Fatalf("GetState = %v, want a *WorkerGoneError: exited with code 3 (stopped by another server)", err)
	}
	if got := inst.State(); got != fleet.StateStopped {
		t.Errorf("after the notice: %s, want stopped", got)
	}
	if got := inst.SessionPath(); got != "/s/w1.jsonl" {
		t.Errorf("SessionPath = %q, want the notice's", got)
	}
	peer.releaseGetState()
}

// Output's tail is the instance's last TailBuffer events, oldest first,
// once more have come than it keeps.
func TestOutputKeepsTheLastEventsInOrder(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	peer.updates = 5
	reg := t.TempDir()
	publish(t, reg, "default", `{}`)
	tf := startFleet(t, t.TempDir(), reg, []fleet.Agent{{Name: "box", Addresses: []string{peer.Addr()}}}, fleet.WithTailBuffer(4))
	tf.waitAgent(t, "box", transport.StateEstablished)
	inst := spawn(t, tf, "box")
	if _, err := inst.Prompt(t.Context(), "go", fleet.PromptOptions{}); err != nil {
		t.Fatal(err)
	}
	// agent_start, 5 message_update, message_end, agent_end,
	// agent_settled, then the get_state response Output asks for.
	out, err := inst.Output(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, raw := range out.Tail {
		var ev struct{ Type string }
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Fatal(err)
		}
		types = append(types, ev.Type)
	}
	if want := []string{"message_end", "agent_end", "agent_settled", "response"}; !slices.Equal(types, want) {
		t.Errorf("tail %v, want %v", types, want)
	}
}

// The agent's exit notice says in words how the worker ended, and the
// instance's end reason shows it.
func TestAnExitNoticeSaysHowTheWorkerEnded(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	tf := newTestFleet(t, peer)
	code := 2.0
	for _, c := range []struct {
		notice transport.WorkerExitedFrame
		want   string
	}{
		{transport.WorkerExitedFrame{ExitCode: &code, State: transport.InstanceExited}, "exited with code 2"},
		{transport.WorkerExitedFrame{Signal: "KILL", State: transport.InstanceExited}, "killed by signal KILL"},
		{transport.WorkerExitedFrame{Lost: true, State: transport.InstanceLost}, "its shim was lost"},
		{transport.WorkerExitedFrame{State: transport.InstanceStopped, Expected: true}, "agent reports it stopped (stopped by another server)"},
	} {
		inst := spawn(t, tf, "box")
		n := c.notice
		n.InstanceID = inst.ID()
		peer.send(peer.conn(), &n)
		tf.waitInstance(t, inst.ID(), fleet.StateStopped)
		for _, st := range tf.Status(t.Context()).Instances {
			if st.InstanceID == inst.ID() && st.EndReason != "worker gone: "+c.want {
				t.Errorf("end reason %q, want %q", st.EndReason, "worker gone: "+c.want)
			}
		}
	}
}

// A reconcile cut short by another loss of the connection (the list of
// the agent's instances never answered) leaves the instances as the
// outage left them; the next connection reconciles them.
func TestAReconcileCutShortIsDoneByTheNextConnection(t *testing.T) {
	tf, peer, proxy := proxiedFleet(t)
	inst := spawn(t, tf, "box")
	lists := make(chan struct{}, 4)
	var swallow atomic.Bool
	peer.mu.Lock()
	peer.script = func(_ *transport.Conn, fr transport.Frame, _ func(transport.Frame)) bool {
		if _, ok := fr.(*transport.ListFrame); ok {
			lists <- struct{}{}
			return swallow.Load() // no answer: the reconcile waits for it
		}
		return false
	}
	peer.mu.Unlock()

	swallow.Store(true)
	proxy.Cut()
	tf.waitInstance(t, inst.ID(), fleet.StateUnreachable)
	<-lists // the reconnect's list, left unanswered
	if got := inst.State(); got != fleet.StateUnreachable {
		t.Fatalf("before the agent listed its workers: %s, want unreachable", got)
	}
	swallow.Store(false)
	proxy.Cut() // the list fails with the connection
	<-lists     // the next connection's, answered
	tf.waitInstance(t, inst.ID(), fleet.StateIdle)
	if _, err := inst.Prompt(t.Context(), "still there?", fleet.PromptOptions{}); err != nil {
		t.Errorf("prompt after the reconcile: %v", err)
	}
}

// A stop whose answer the connection loss cuts off releases its caller
// with ErrNotConnected; the instance stays stopping until the reconnect,
// where the agent lists the worker stopped: the instance ends stopped as
// asked, not as a worker that died.
func TestAStopCutOffByAConnectionLossEndsAfterTheReconnect(t *testing.T) {
	tf, peer, proxy := proxiedFleet(t)
	inst := spawn(t, tf, "box")
	held := make(chan func(), 1)
	peer.mu.Lock()
	peer.stopGate = func(send func()) { held <- send }
	peer.mu.Unlock()
	errc := make(chan error, 1)
	go func() { errc <- inst.Stop(t.Context()) }()
	<-held // the agent stopped the worker; its answer waits
	proxy.Refuse(true)
	proxy.Cut()
	if err := <-errc; !errors.Is(err, fleet.ErrNotConnected) {
		t.Fatalf("Stop cut off by the connection loss = %v, want ErrNotConnected", err)
	}
	if got := inst.State(); got != fleet.StateStopping {
		t.Errorf("during the outage: %s, want stopping", got)
	}
	proxy.Refuse(false)
	tf.waitInstance(t, inst.ID(), fleet.StateStopped)
	for _, st := range tf.Status(t.Context()).Instances {
		if st.InstanceID == inst.ID() && st.EndReason != "" {
			t.Errorf("end reason %q, want none (stopped as asked)", st.EndReason)
		}
	}
}
