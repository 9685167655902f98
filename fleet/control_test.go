package fleet_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"example.com/pifleet/fleet"
	"example.com/pifleet/internal/netfault"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/auth"
	"example.com/pifleet/transport/identity"
	"example.com/pifleet/transport/trust"
)

func TestAllowPolicySpawnsButDoesNotSteer(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	reg := t.TempDir()
	publish(t, reg, "default", `{}`)
	tf := startFleet(t, t.TempDir(), reg, []fleet.Agent{{Name: "box", Addresses: []string{peer.Addr()}}},
		fleet.WithPrompter(trust.Fixed(trust.Allow)))
	tf.waitAgent(t, "box", transport.StateEstablished)

	inst := spawn(t, tf, "box")
	_, err := inst.Prompt(t.Context(), "hi", fleet.PromptOptions{})
	var pe *trust.PolicyError
	if !errors.As(err, &pe) || pe.Policy != trust.Allow {
		t.Fatalf("Prompt on an allow machine = %v, want a *trust.PolicyError", err)
	}
	if _, err := inst.Read(t.Context(), "x", fleet.ReadOptions{}); err != nil {
		t.Errorf("viewing an allow machine: %v", err)
	}
	if err := inst.Stop(t.Context()); err != nil {
		t.Errorf("stopping on an allow machine: %v", err)
	}
}

func TestDeniedAgentIsRejectedAndNeverRedialled(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	reg := t.TempDir()
	publish(t, reg, "default", `{}`)
	tf := startFleet(t, t.TempDir(), reg, []fleet.Agent{{Name: "box", Addresses: []string{peer.Addr()}}},
		fleet.WithPrompter(trust.Fixed(trust.Deny)))
	tf.waitAgent(t, "box", transport.StateRejected)
	if _, err := tf.Spawn(t.Context(), fleet.SpawnOptions{Agent: "box", Cwd: "/", Bundle: "default"}); !errors.Is(err, fleet.ErrAgentRefused) {
		t.Errorf("Spawn on a denied agent: %v, want ErrAgentRefused at once", err)
	}
	// Once the operator allows it, Retry dials it again.
	if _, err := tf.Trust().Set("box", trust.Steer); err != nil {
		t.Fatal(err)
	}
	if err := tf.Retry("box"); err != nil {
		t.Fatal(err)
	}
	tf.waitAgent(t, "box", transport.StateEstablished)
}

func TestInboundAgentPassesFirstContactTrust(t *testing.T) {
	peer := newTestAgentPeer(t, "laptop", true)
	whois, err := identity.ParseStatic("127.0.0.1=laptop/ana@github")
	if err != nil {
		t.Fatal(err)
	}
	asked := make(chan identity.Identity, 1)
	reg := t.TempDir()
	publish(t, reg, "default", `{}`)
	tf := startFleet(t, t.TempDir(), reg, nil,
		fleet.WithInbound("127.0.0.1:0"), fleet.WithWhois(whois),
		fleet.WithPrompter(trust.PrompterFunc(func(_ context.Context, id identity.Identity) (trust.Policy, error) {
			asked <- id
			return trust.Steer, nil
		})))
	peer.dialIn(tf.InboundAddr())
	tf.waitAgent(t, "laptop", transport.StateEstablished)
	if id := <-asked; id.Machine != "laptop" || id.User != "ana@github" {
		t.Errorf("first contact asked about %v", id)
	}
	if d, ok, _ := tf.Trust().Get("laptop"); !ok || d.Policy != trust.Steer {
		t.Errorf("decision not stored: %+v %v", d, ok)
	}
	inst := spawn(t, tf, "laptop")
	if _, err := inst.Prompt(t.Context(), "from the inbound side", fleet.PromptOptions{}); err != nil {
		t.Fatal(err)
	}
}

// Seed §5 with keys: the key an agent that dials in proves at first
// contact is stored with the decision; later connections must prove the
// same key (admitted without a question); a connection proving another
// key is a new first contact (denied here, and not admitted), and one
// proving nothing is refused.
func TestInboundAgentKeyIsStoredThenEnforced(t *testing.T) {
	first := newTestAgentPeer(t, "laptop", true)
	whois, err := identity.ParseStatic("127.0.0.1=laptop/ana@github")
	if err != nil {
		t.Fatal(err)
	}
	answers := make(chan trust.Policy, 4)
	var asked atomic.Int32
	reg := t.TempDir()
	publish(t, reg, "default", `{}`)
	tf := startFleet(t, t.TempDir(), reg, nil,
		fleet.WithInbound("127.0.0.1:0"), fleet.WithWhois(whois),
		fleet.WithPrompter(trust.PrompterFunc(func(context.Context, identity.Identity) (trust.Policy, error) {
			asked.Add(1)
			return <-answers, nil
		})))
	answers <- trust.Steer
	first.dialIn(tf.InboundAddr())
	tf.waitAgent(t, "laptop", transport.StateEstablished)
	d, ok, _ := tf.Trust().Get("laptop")
	if !ok || d.Key != auth.FormatPublicKey(first.key.Public().(ed25519.PublicKey)) {
		t.Fatalf("decision %+v: the agent's key is not stored", d)
	}

	// The same agent again (its connection lost): admitted, not asked.
	first.conn().Close()
	tf.waitAgent(t, "laptop", transport.StateLost)
	first.dialIn(tf.InboundAddr())
	tf.waitAgent(t, "laptop", transport.StateEstablished)
	if n := asked.Load(); n != 1 {
		t.Fatalf("asked %d times, want once", n)
	}

	// Another process of that machine with another key: asked again; the
	// operator denies it, and it gets no further.
	first.conn().Close()
	tf.waitAgent(t, "laptop", transport.StateLost)
	impostor := newTestAgentPeer(t, "laptop", true)
	answers <- trust.Deny
	impostor.dialIn(tf.InboundAddr())
	select {
	case <-impostor.conn().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the impostor's connection stays open")
	}
	if n := asked.Load(); n != 2 {
		t.Errorf("asked %d times, want twice (the new key is a new first contact)", n)
	}
	if st := tf.Status(t.Context()); len(st.Agents) != 1 || st.Agents[0].State == transport.StateEstablished {
		t.Errorf("agents after the impostor: %+v", st.Agents)
	}
	for _, fr := range drainFrames(impostor) {
		if _, hello := fr.(*transport.HelloFrame); !hello {
			t.Errorf("the impostor was sent %s", fr.FrameType())
		}
	}
}

func TestUIRequestsAnsweredByPolicyOrByTheApplication(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	tf := newTestFleet(t, peer)
	publish(t, tf.regRoot, "asks", `{"ui":{"autoAnswer":{"Proceed?":true}}}`)
	inst, err := tf.Spawn(t.Context(), fleet.SpawnOptions{Agent: "box", Cwd: "/work/repo", Bundle: "asks"})
	if err != nil {
		t.Fatal(err)
	}
	peer.askUI(inst.ID(), "u1", "Proceed?")
	resp := nextFrame[*transport.UIResponseFrame](t, peer)
	if resp.RequestID != "u1" || string(resp.Value) != "true" {
		t.Errorf("policy answer %+v value %s", resp, resp.Value)
	}

	peer.askUI(inst.ID(), "u2", "Delete the branch?")
	tf.waitChange(t, "ui request", func(c fleet.Change) bool {
		return c.Kind == fleet.ChangeUIRequest && c.UI != nil && c.UI.RequestID == "u2"
	})
	if err := tf.AnswerUI(t.Context(), inst.ID(), "u2", false); err != nil {
		t.Fatal(err)
	}
	resp = nextFrame[*transport.UIResponseFrame](t, peer)
	if resp.RequestID != "u2" || string(resp.Value) != "false" {
		t.Errorf("application answer %+v value %s", resp, resp.Value)
	}
	if err := tf.AnswerUI(t.Context(), inst.ID(), "u2", true); !errors.Is(err, fleet.ErrUnknownUIRequest) {
		t.Errorf("answering twice: %v", err)
	}
}

func TestRebundleAndSetTools(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	tf := newTestFleet(t, peer)
	publish(t, tf.regRoot, "next", `{}`)
	publish(t, tf.regRoot, "broken", `{}`)
	inst := spawn(t, tf, "box")

	if err := inst.Rebundle(t.Context(), "next"); err != nil {
		t.Fatal(err)
	}
	err := inst.Rebundle(t.Context(), "broken")
	var re *fleet.RebundleError
	if !errors.As(err, &re) || re.Code != "fetch_failed" || re.Bundle != "next" {
		t.Fatalf("failed rebundle = %v, want a *RebundleError keeping next", err)
	}
	st := tf.Status(t.Context())
	if st.Instances[0].Bundle != "next" {
		t.Errorf("bundle after rebundles %q, want next", st.Instances[0].Bundle)
	}
	tools, err := inst.SetTools(t.Context(), []string{"read", "grep"})
	if err != nil || len(tools) != 2 {
		t.Fatalf("SetTools = %v, %v", tools, err)
	}
}

func TestHeartbeatExpiryMakesTheAgentUnreachable(t *testing.T) {
	tf, _, proxy := proxiedFleet(t,
		func(c *fleet.Config) {
			c.Conn.HeartbeatInterval = 20 * time.Millisecond
			c.Conn.ExpiryTimeout = 150 * time.Millisecond
		})
	inst := spawn(t, tf, "box")
	drainChanges(tf.sub)

	proxy.Stall(netfault.Both) // silence, not a close: only the expiry can tell
	tf.waitChange(t, "agent lost", func(c fleet.Change) bool {
		return c.Kind == fleet.ChangeAgentState && c.To == string(transport.StateLost)
	})
	tf.waitChange(t, "instance unreachable", func(c fleet.Change) bool {
		return c.Kind == fleet.ChangeInstanceState && c.InstanceID == inst.ID() && c.To == string(fleet.StateUnreachable)
	})
	if _, err := inst.PromptAsync(t.Context(), "anyone?", fleet.PromptOptions{}); !errors.Is(err, fleet.ErrNotConnected) {
		t.Errorf("prompt while unreachable: %v, want ErrNotConnected", err)
	}
	proxy.Cut()
	proxy.Resume()
	tf.waitInstance(t, inst.ID(), fleet.StateIdle)
}

// FakeTailnet is a Tailnet with a fixed peer list (no tailscaled here).
type FakeTailnet struct{ status identity.Status }

func (f FakeTailnet) Status(context.Context) (identity.Status, error) { return f.status, nil }

func TestTailnetPeersBecomeAgents(t *testing.T) {
	peer := newTestAgentPeer(t, "buildbox", true)
	_, portStr, _ := net.SplitHostPort(peer.Addr())
	port, _ := strconv.Atoi(portStr)
	tn := FakeTailnet{identity.Status{BackendState: "Running", Peers: []identity.Peer{
		{HostName: "buildbox", DNSName: "buildbox.tail1234.ts.net.", Online: true, TailscaleIPs: []netip.Addr{netip.MustParseAddr("127.0.0.1")}},
		{HostName: "offline", Online: false, TailscaleIPs: []netip.Addr{netip.MustParseAddr("127.0.0.9")}},
	}}}
	reg := t.TempDir()
	publish(t, reg, "default", `{}`)
	tf := startFleet(t, t.TempDir(), reg, nil, fleet.WithTailnet(tn), func(c *fleet.Config) { c.TailnetPort = port })
	tf.waitAgent(t, "buildbox", transport.StateEstablished)
	for _, a := range tf.Status(t.Context()).Agents {
		if a.Name == "offline" {
			t.Error("an offline peer was added")
		}
		if a.Name == "buildbox" && a.Source != "tailnet" {
			t.Errorf("source %q", a.Source)
		}
	}
}

func TestRawRPCReturnsPisResponse(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	tf := newTestFleet(t, peer)
	inst := spawn(t, tf, "box")
	r, err := inst.RPC(t.Context(), json.RawMessage(`{"type":"get_state"}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.Command != "get_state" || !r.Success {
		t.Errorf("response %+v", r)
	}
	out, err := inst.Output(t.Context())
	if err != nil || out.State == nil || out.State.SessionID != "s-1" {
		t.Fatalf("Output = %+v, %v", out, err)
	}
	st := tf.Status(t.Context())
	if a := st.Agents[0]; a.Platform != "linux" || a.Policy != trust.Steer || a.Dial == nil && a.State != transport.StateEstablished {
		t.Errorf("agent status %+v", a)
	}
}

// Spawn right after Start does not race the agent's connection: it waits
// for it (the README's and the Example's code spawn without waiting).
func TestSpawnRightAfterStartWaitsForTheAgent(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	reg := t.TempDir()
	publish(t, reg, "default", `{}`)
	tf := startFleet(t, t.TempDir(), reg, []fleet.Agent{{Name: "box", Addresses: []string{peer.Addr()}}})
	inst, err := tf.Spawn(t.Context(), fleet.SpawnOptions{Agent: "box", Cwd: "/work/repo", Bundle: "default"})
	if err != nil {
		t.Fatalf("Spawn right after Start: %v", err)
	}
	if st := inst.State(); st != fleet.StateIdle {
		t.Errorf("spawned instance is %s", st)
	}
	if err := tf.WaitAgent(t.Context(), "box"); err != nil {
		t.Errorf("WaitAgent on a connected agent: %v", err)
	}
}

func TestWaitAgentSaysWhyItGaveUp(t *testing.T) {
	dead := refusedAddr(t) // nothing listens there: every dial fails
	tf := startFleet(t, t.TempDir(), t.TempDir(), []fleet.Agent{{Name: "down", Addresses: []string{dead}}})

	if err := tf.WaitAgent(t.Context(), "nobody"); !errors.Is(err, fleet.ErrUnknownAgent) {
		t.Errorf("WaitAgent on an unknown agent: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	err := tf.WaitAgent(ctx, "down")
	if !errors.Is(err, fleet.ErrNotConnected) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitAgent on an agent that never answers: %v", err)
	}
	_, err = tf.Spawn(ctx, fleet.SpawnOptions{Agent: "down", Cwd: "/", Bundle: "default"})
	if !errors.Is(err, fleet.ErrNotConnected) {
		t.Errorf("Spawn on an agent that never answers: %v", err)
	}
	if err := tf.Close(); err != nil {
		t.Fatal(err)
	}
	if err := tf.WaitAgent(t.Context(), "down"); !errors.Is(err, fleet.ErrClosed) {
		t.Errorf("WaitAgent after Close: %v", err)
	}
}

// Retry dials a lost agent now instead of at the end of its backoff: an
// agent restarted by its operator is back at once.
func TestRetryRedialsALostAgentNow(t *testing.T) {
	addr := refusedAddr(t) // the agent is down: the first dial fails
	tf := startFleet(t, t.TempDir(), t.TempDir(), []fleet.Agent{{Name: "box", Addresses: []string{addr}}},
		func(c *fleet.Config) { c.Dialer.MinRetryInterval, c.Dialer.MaxRetryInterval = time.Hour, time.Hour })
	tf.waitAgent(t, "box", transport.StateLost)
	newTestAgentPeerAt(t, addr, "box", true) // the operator restarted it
	if err := tf.Retry("box"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second) // far below the hour of backoff
	defer cancel()
	if err := tf.WaitAgent(ctx, "box"); err != nil {
		t.Fatalf("after Retry: %v", err)
	}
}

// A dialog with its own timeout is answered by pi itself once it passes:
// it leaves the pending dialogs, and answering it says so.
func TestDialogResolvedByItsOwnTimeoutIsNoLongerPending(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	peer := newTestAgentPeer(t, "box", true)
	reg := t.TempDir()
	publish(t, reg, "default", `{}`)
	tf := startFleet(t, t.TempDir(), reg, []fleet.Agent{{Name: "box", Addresses: []string{peer.Addr()}}}, fleet.WithClock(clock))
	inst := spawn(t, tf, "box")

	peer.event(peer.conn(), inst.ID(), `{"type":"extension_ui_request","id":"u3","method":"confirm","title":"Go on?","message":"","timeout":1000}`)
	peer.askUI(inst.ID(), "u3", "Go on?")
	tf.waitChange(t, "ui request", func(c fleet.Change) bool {
		return c.Kind == fleet.ChangeUIRequest && c.UI != nil && c.UI.RequestID == "u3"
	})
	pending := func() []fleet.UIRequest {
		for _, is := range tf.Status(t.Context()).Instances {
			if is.InstanceID == inst.ID() {
				return is.PendingUI
			}
		}
		return nil
	}
	if p := pending(); len(p) != 1 || p[0].Deadline.Sub(p[0].At) != time.Second {
		t.Fatalf("pending before the timeout: %+v", p)
	}
	mu.Lock()
	now = now.Add(2 * time.Second)
	mu.Unlock()
	if p := pending(); len(p) != 0 {
		t.Errorf("pending after pi's own timeout: %+v", p)
	}
	peer.askUI(inst.ID(), "u4", "Again?")
	tf.waitChange(t, "ui request", func(c fleet.Change) bool {
		return c.Kind == fleet.ChangeUIRequest && c.UI != nil && c.UI.RequestID == "u4"
	})
	if err := tf.AnswerUI(t.Context(), "", "u3", true); !errors.Is(err, fleet.ErrUIRequestExpired) {
		t.Errorf("answer after the timeout: %v", err)
	}
	if err := tf.AnswerUI(t.Context(), "", "u3", true); !errors.Is(err, fleet.ErrUnknownUIRequest) {
		t.Errorf("second answer after the timeout: %v", err)
	}
	// Answered after its deadline, before any listing dropped it.
	peer.event(peer.conn(), inst.ID(), `{"type":"extension_ui_request","id":"u5","method":"confirm","title":"Late?","message":"","timeout":500}`)
	peer.askUI(inst.ID(), "u5", "Late?")
	tf.waitChange(t, "ui request", func(c fleet.Change) bool {
		return c.Kind == fleet.ChangeUIRequest && c.UI != nil && c.UI.RequestID == "u5"
	})
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	if err := tf.AnswerUI(t.Context(), inst.ID(), "u5", true); !errors.Is(err, fleet.ErrUIRequestExpired) {
		t.Errorf("answer of an expired dialog: %v", err)
	}
	if err := tf.AnswerUI(t.Context(), inst.ID(), "u4", false); err != nil {
		t.Errorf("answer of a dialog without a timeout: %v", err)
	}
}

// A dialog that its agent reports ended without an answer (ui_ended)
// leaves the pending dialogs at once, whatever its deadline, and
// subscribers are told how it ended; answering it says why it is too
// late. A report for a dialog the fleet does not know changes nothing.
func TestADialogItsAgentReportsEndedIsDropped(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	tf := newTestFleet(t, peer)
	inst := spawn(t, tf, "box")
	pending := func() []fleet.UIRequest {
		for _, is := range tf.Status(t.Context()).Instances {
			if is.InstanceID == inst.ID() {
				return is.PendingUI
			}
		}
		return nil
	}
	for _, tc := range []struct {
		reason transport.UIEndReason
		says   string
	}{
		{transport.UIEndTimedOut, "its time ran out"},
		{transport.UIEndCancelled, "the worker process that asked is gone"},
	} {
		id := "u-" + string(tc.reason)
		peer.askUI(inst.ID(), id, "Go on?")
		tf.waitChange(t, "ui request", func(c fleet.Change) bool {
			return c.Kind == fleet.ChangeUIRequest && c.UI != nil && c.UI.RequestID == id
		})
		if p := pending(); len(p) != 1 {
			t.Fatalf("pending before its end: %+v", p)
		}
		peer.send(peer.conn(), &transport.UIEndedFrame{InstanceID: inst.ID(), RequestID: "u-unknown", Reason: tc.reason})
		peer.send(peer.conn(), &transport.UIEndedFrame{InstanceID: inst.ID(), RequestID: id, Reason: tc.reason})
		var ended fleet.Change
		tf.waitChange(t, "the dialog's end", func(c fleet.Change) bool {
			ended = c
			return c.Kind == fleet.ChangeUIEnded
		})
		if ended.UI == nil || ended.UI.RequestID != id || ended.InstanceID != inst.ID() || !strings.Contains(ended.Message, tc.says) {
			t.Errorf("change %+v (UI %+v), want dialog %s ended: %s", ended, ended.UI, id, tc.says)
		}
		if p := pending(); len(p) != 0 {
			t.Errorf("pending after its end: %+v", p)
		}
		if err := tf.AnswerUI(t.Context(), "", id, true); !errors.Is(err, fleet.ErrUIRequestExpired) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("answer after its end: %v", err)
		}
		if err := tf.AnswerUI(t.Context(), "", id, true); !errors.Is(err, fleet.ErrUnknownUIRequest) {
			t.Errorf("second answer after its end: %v", err)
		}
	}
}

// The server's dial checks the name: a peer whose whois machine is not
// the directory's name for that address is refused (never commanded as
// that agent), even though its hello claims the right name.
func TestDialRefusesAPeerWhoseWhoisNamesAnotherMachine(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true) // its hello says "box"
	whois, err := identity.ParseStatic("127.0.0.1=laptop/eve@example")
	if err != nil {
		t.Fatal(err)
	}
	tf := startFleet(t, t.TempDir(), t.TempDir(), []fleet.Agent{{Name: "box", Addresses: []string{peer.Addr()}}},
		fleet.WithWhois(whois))
	tf.waitAgent(t, "box", transport.StateRejected)
	st := tf.Status(t.Context())
	if len(st.Agents) != 1 || !strings.Contains(st.Agents[0].LastError, `whois says it is "laptop"`) {
		t.Fatalf("agents %+v", st.Agents)
	}
	for _, fr := range drainFrames(peer) {
		t.Errorf("the wrong machine was sent %s", fr.FrameType())
	}
}
