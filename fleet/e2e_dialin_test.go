//go:build unix

package fleet_test

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"example.com/pifleet/fleet"
	"example.com/pifleet/fleet/agent"
	"example.com/pifleet/fleet/controlapi"
	"example.com/pifleet/internal/e2ekit"
	"example.com/pifleet/internal/pitest"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/auth"
	"example.com/pifleet/transport/identity"
	"example.com/pifleet/transport/trust"
)

// dialInAgent prepares a pifleet-agent that dials the server's inbound
// address from localIP, which the server's static map names machine; it
// trusts only the server "box" (127.0.0.1 in its own map).
func dialInAgent(t *testing.T, machine, localIP, inbound string) *agentWorld {
	t.Helper()
	_, bin := binaries(t)
	ps := pitest.Command(t, pitest.Scripted, pitest.Options{})
	stateDir := shortDir(t, "pfa")
	e2ekit.CleanupWorkers(t, stateDir)
	return &agentWorld{bin: bin, cwd: ps.Dir,
		args: []string{"serve", "--listen", localIP + ":0", "--machine", machine, "--server", "box",
			"--whois-static", "127.0.0.1=box", "--server-key", auth.FormatPublicKey(testServerKey), "--state-dir", stateDir, "--pi", ps.Path},
		env: processEnv(ps.Env, "PIFLEET_SESSIONS_ROOT="+filepath.Join(ps.AgentDir, "sessions"),
			"PIFLEET_DIAL="+inbound, "PIFLEET_DIAL_FROM="+localIP)}
}

// transitioned matches the dialling agent's connection transition.
func transitioned(event string, to transport.ConnState) func(logLine) bool {
	return func(l logLine) bool {
		return l.Message == "connection state" && l.Event == event && l.To == string(to)
	}
}

// nth matches the n-th line that match accepts.
func nth(n int, match func(logLine) bool) func(logLine) bool {
	return func(l logLine) bool {
		if match(l) {
			n--
		}
		return n == 0
	}
}

// Seed §5 with the two real binaries on loopback: agents dial in to the
// server's --inbound address (PIFLEET_DIAL), and the server's trust
// decides who joins. An unknown machine is refused while nobody answers
// for it; once `trust set` allows it, the agent's next attempt is admitted;
// spawn and prompt run over the dialled-in connection; after the server
// restarts, the agent redials on its schedule (1 s, 2 s, 4 s …) and the
// stored decision admits it with its worker still there; an agent killed
// and started again is admitted at its first attempt and re-adopts its
// worker; a denied machine is refused every time.
func TestAgentDialsInWithTheRealBinaries(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end with processes")
	}
	serverBin, _ := binaries(t)
	reg := t.TempDir()
	publish(t, reg, "plain", `{}`)
	inbound := refusedAddr(t)
	stateDir := shortDir(t, "pfs")
	copyKeyFile(t, stateDir)
	serve := func() *proc {
		return startProc(t, "pifleet-server", serverBin, processEnv(os.Environ()), "pifleet-server serving",
			"serve", "--state-dir", stateDir, "--registry", reg, "--listen", "127.0.0.1:0", "--inbound", inbound,
			"--whois-static", "127.0.0.1=box,127.0.0.2=alpha/ana@example,127.0.0.3=beta/bob@example")
	}
	server := serve()
	ctx, cancel := context.WithTimeout(context.Background(), 4*procWait)
	defer cancel()
	c, err := controlapi.NewClient(controlapi.DefaultAddr(stateDir))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	watch, err := c.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer watch.Close()

	// First contact: no terminal to ask on, so the unknown machine is
	// refused once it proved its key, and nothing is stored; the agent
	// loses the connection and tries again.
	alpha := dialInAgent(t, "alpha", "127.0.0.2", inbound)
	agentProc := alpha.start(t)
	server.waitLog(t, "alpha's first contact", func(l logLine) bool {
		return l.Message == "first contact: no answer, refused and not stored" && l.Machine == "alpha"
	})
	agentProc.waitLog(t, "the refused connection", transitioned(string(transport.EventConnectionLost), transport.StateLost))
	if ds, err := c.TrustList(ctx); err != nil || len(ds) != 0 {
		t.Fatalf("decisions after an unanswered first contact: %+v, %v", ds, err)
	}
	if _, err := c.TrustSet(ctx, "alpha", controlapi.PolicySteer); err != nil {
		t.Fatal(err)
	}
	nextChange(t, watch, "alpha established", func(ch controlapi.Change) bool {
		return ch.Kind == controlapi.ChangeAgentState && ch.Agent == "alpha" && ch.To == string(transport.StateEstablished)
	})
	agentProc.waitLog(t, "the server's proof", func(l logLine) bool { return l.Message == "server proved its key" })
	st, err := c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(st.Agents, func(a controlapi.Agent) bool { return a.Name == "alpha" }); i < 0 ||
		st.Agents[i].Source != "inbound" || st.Agents[i].User != "ana@example" || st.Agents[i].Policy != "steer" {
		t.Fatalf("agents: %+v", st.Agents)
	}

	sp, err := c.Spawn(ctx, controlapi.SpawnRequest{Agent: "alpha", Cwd: alpha.cwd, Bundle: "plain"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background(), sp.InstanceID) })
	if pr, err := c.Prompt(ctx, sp.InstanceID, controlapi.PromptRequest{Text: "say: dialled in", Wait: true}); err != nil || pr.Reply != "dialled in" {
		t.Fatalf("prompt over the dialled-in connection: %+v, %v", pr, err)
	}

	// The server goes away: the agent redials on its schedule, and the
	// restarted server admits it by the stored decision (it has nobody to
	// ask), with its worker.
	server.terminate(t)
	for _, ms := range []float64{1000, 2000, 4000} {
		agentProc.waitLog(t, "a redial delay of "+time.Duration(ms*float64(time.Millisecond)).String(), func(l logLine) bool {
			return l.Message == "connection state" && l.To == string(transport.StateLost) && l.RetryIn == ms
		})
	}
	server = serve()
	watch2, err := c.Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer watch2.Close()
	nextChange(t, watch2, "alpha established again", func(ch controlapi.Change) bool {
		return ch.Kind == controlapi.ChangeAgentState && ch.Agent == "alpha" && ch.To == string(transport.StateEstablished)
	})
	// Subscribed before the status is read: the worker is idle in the
	// status, or its reconciliation is still to come on the stream.
	if st, err = c.Status(ctx); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(st.Instances, func(in controlapi.Instance) bool {
		return in.ID == sp.InstanceID && in.State == string(fleet.StateIdle)
	}) {
		nextChange(t, watch2, "the worker idle again", func(ch controlapi.Change) bool {
			return ch.Kind == controlapi.ChangeInstanceState && ch.InstanceID == sp.InstanceID && ch.To == string(fleet.StateIdle)
		})
	}
	if pr, err := c.Prompt(ctx, sp.InstanceID, controlapi.PromptRequest{Text: "say: after the restart", Wait: true}); err != nil || pr.Reply != "after the restart" {
		t.Fatalf("prompt after the server's restart: %+v, %v", pr, err)
	}

	// The agent is killed and started again: its first attempt is
	// admitted by the stored decision, and it re-adopts its worker.
	agentProc.kill9()
	isWorker := func(to fleet.InstanceState) func(controlapi.Change) bool {
		return func(ch controlapi.Change) bool {
			return ch.Kind == controlapi.ChangeInstanceState && ch.InstanceID == sp.InstanceID && ch.To == string(to)
		}
	}
	nextChange(t, watch2, "the worker unreachable", isWorker(fleet.StateUnreachable))
	agentProc = alpha.start(t)
	nextChange(t, watch2, "the worker idle after the agent's restart", isWorker(fleet.StateIdle))
	agentProc.waitLog(t, "its first attempt admitted", transitioned(string(transport.EventAllowed), transport.StateEstablished))
	if pr, err := c.Prompt(ctx, sp.InstanceID, controlapi.PromptRequest{Text: "say: re-adopted", Wait: true}); err != nil || pr.Reply != "re-adopted" {
		t.Fatalf("prompt after the agent's restart: %+v, %v", pr, err)
	}

	// A denied machine is refused before a frame, every time it dials.
	if _, err := c.TrustSet(ctx, "beta", controlapi.PolicyDeny); err != nil {
		t.Fatal(err)
	}
	beta := dialInAgent(t, "beta", "127.0.0.3", inbound)
	betaProc := beta.start(t)
	betaProc.waitLog(t, "a second refused handshake", nth(2, transitioned(string(transport.EventHandshakeFailed), transport.StateLost)))
	server.waitLog(t, "beta refused", func(l logLine) bool { return l.Message == "refused" && l.Machine == "beta" })
	st, err = c.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range st.Agents {
		if a.Name == "beta" {
			t.Errorf("the denied machine is in the fleet: %+v", a)
		}
	}
	if err := c.Stop(ctx, sp.InstanceID); err != nil {
		t.Fatal(err)
	}
	betaProc.terminate(t)
	agentProc.terminate(t)
	server.terminate(t)
}

// Seed §5 through the SDK with the real agent daemon dialling in: the
// first contact asks the prompter once, the answer is stored, and the
// worker spawned over the dialled-in connection answers; after the server
// restarts on the same state, the agent dials again and the stored
// decision admits it without a question.
func TestAgentDialsInAndFirstContactAsks(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	reg := t.TempDir()
	publish(t, reg, "plain", `{}`)
	whois, err := identity.ParseStatic("127.0.0.1=orchestrator", "127.0.0.2=worker-01/ana@example")
	if err != nil {
		t.Fatal(err)
	}
	inbound, stateDir := refusedAddr(t), t.TempDir()
	asked := make(chan identity.Identity, 4)
	prompter := fleet.WithPrompter(trust.PrompterFunc(func(_ context.Context, id identity.Identity) (trust.Policy, error) {
		asked <- id
		return trust.Steer, nil
	}))
	tf := startFleet(t, stateDir, reg, nil, fleet.WithInbound(inbound), fleet.WithWhois(whois), prompter)
	_, ps := startAgentWith(t, pitest.Scripted, reg, func(c *agent.Config) {
		c.Dial = []string{inbound}
		c.DialFrom = netip.MustParseAddr("127.0.0.2")
		c.DialRetryMin, c.DialRetryMax = 10*time.Millisecond, 50*time.Millisecond
	})
	tf.waitAgent(t, "worker-01", transport.StateEstablished)
	if id := <-asked; id.Machine != "worker-01" || id.User != "ana@example" {
		t.Errorf("first contact asked about %v", id)
	}
	if d, ok, _ := tf.Trust().Get("worker-01"); !ok || d.Policy != trust.Steer {
		t.Errorf("decision not stored: %+v %v", d, ok)
	}
	inst, err := tf.Spawn(t.Context(), fleet.SpawnOptions{Agent: "worker-01", Cwd: ps.Dir, Bundle: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	if text, err := inst.Prompt(t.Context(), "say: hello from the dialled-in worker", fleet.PromptOptions{}); err != nil || text != "hello from the dialled-in worker" {
		t.Fatalf("Prompt = %q, %v", text, err)
	}

	if err := tf.Close(); err != nil {
		t.Fatal(err)
	}
	tf = startFleet(t, stateDir, reg, nil, fleet.WithInbound(inbound), fleet.WithWhois(whois), prompter)
	tf.waitInstance(t, inst.ID(), fleet.StateIdle)
	inst, err = tf.Instance(inst.ID())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = inst.Stop(context.Background()) })
	if text, err := inst.Prompt(t.Context(), "say: again", fleet.PromptOptions{}); err != nil || text != "again" {
		t.Fatalf("Prompt after the restart = %q, %v", text, err)
	}
	select {
	case id := <-asked:
		t.Errorf("asked again about %v", id)
	default:
	}
}
