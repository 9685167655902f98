//go:build linux

package fleet_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"example.com/pifleet/bundle/registry"
	"example.com/pifleet/fleet"
	"example.com/pifleet/fleet/internal/serverstore"
	"example.com/pifleet/internal/e2ekit"
)

// The kill campaigns (README, "Reliability"): a real pifleet-agent with
// the scripted worker, an application embedding the fleet in its own
// process (campaignApp, this test binary re-executed), real TCP on
// loopback, and SIGKILL at random moments: of the application's server
// process (TestKillCampaignServer) or of the agent
// (TestKillCampaignAgent). At the end every task_done the agent produced
// must have reached the application's WithTaskDone callback (its
// delivery log), a report handed out twice must carry the same key, no
// task or worker may be left in a state no event leaves, and no process
// may be left behind (checked through the process tree: this process is
// the subreaper of everything the campaign starts).
//
// go test -race ./... runs a short campaign; the full one is
//
//	PIFLEET_KILLS=100 go test -run 'TestKillCampaign' -v -timeout 30m ./fleet/
//
// PIFLEET_KILL_SEED repeats a campaign's kill schedule (it is logged).
//
// Both campaigns run by default (go test ./..., with defaultKills kills
// each, well inside CI's time budget); PIFLEET_KILLS sets the count.
const (
	serverCampaignByDefault = true
	agentCampaignByDefault  = true
)

const (
	envKills        = "PIFLEET_KILLS"
	envKillSeed     = "PIFLEET_KILL_SEED"
	defaultKills    = 10
	campaignBundles = 40 // spawn k runs bundle b<k mod 40>: most spawns sync a bundle
	campaignWorkers = 2
	// drainWait bounds the final run, which finishes every open task:
	// what is not finished by then is stuck.
	drainWait = 90 * time.Second
	// phaseWait bounds the wait for the moment a kill aims at; the kill
	// comes at the deadline anyway.
	phaseWait = 2 * time.Second
	// orphanWait bounds the wait for the shims of stopped workers to end
	// once the agent acknowledged their exits (they do at once).
	orphanWait = 15 * time.Second
)

func campaignParams(t *testing.T, byDefault bool) (kills int, seed uint64) {
	t.Helper()
	if testing.Short() {
		t.Skip("kill campaign: processes, seconds")
	}
	kills = defaultKills
	s := os.Getenv(envKills)
	if s == "" && !byDefault {
		t.Skipf("kill campaign: set %s (or run .ci/kill-campaign); it does not run by default while the crash defects it finds are open", envKills)
	}
	if s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a positive number of kills", envKills, s)
		}
		kills = n
	}
	seed = uint64(time.Now().UnixNano())
	if s := os.Getenv(envKillSeed); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: want a number", envKillSeed, s)
		}
		seed = n
	}
	t.Logf("kill campaign: %d kills, %s=%d", kills, envKillSeed, seed)
	return kills, seed
}

// campaign is one kill campaign's world.
type campaign struct {
	t          *testing.T
	seed       uint64
	rng        *rand.Rand
	aw         *agentWorld
	stateDir   string
	deliveries string
	appArgs    []string
	agents     []*proc // every agent process, in order
	app        *proc
	// ours are the processes the test started and waits for itself.
	ours map[int]bool
	// before are this process's descendants when the campaign began.
	before map[int]bool
	kills  int
	phases map[string]int
	// agentLogsComplete: no agent was killed, so its log names every
	// task_done it sent.
	agentLogsComplete bool
}

func newCampaign(t *testing.T, seed uint64) *campaign {
	t.Helper()
	reg := t.TempDir()
	for i := range campaignBundles {
		publishFiles(t, reg, "b"+strconv.Itoa(i), 24)
	}
	c := &campaign{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		aw:       newAgentWorld(t, "box", "orchestrator", "127.0.0.1=orchestrator/ana@example"),
		stateDir: shortDir(t, "pfs"), ours: map[int]bool{}, phases: map[string]int{}}
	c.deliveries = filepath.Join(t.TempDir(), "deliveries.jsonl")
	c.appArgs = []string{"--state-dir", c.stateDir, "--key-file", testKeyFile, "--registry", reg,
		"--agent", "box=" + c.aw.addr, "--cwd", c.aw.cwd, "--bundles", strconv.Itoa(campaignBundles),
		"--workers", strconv.Itoa(campaignWorkers), "--deliveries", c.deliveries}
	// Orphans of the campaign's processes become this process's children,
	// so that the process tree shows every one of them.
	e2ekit.BecomeSubreaper(t)
	c.before = map[int]bool{}
	for _, p := range e2ekit.Descendants(os.Getpid()) {
		c.before[p.PID] = true
	}
	return c
}

// publishFiles publishes bundle name with n small files besides its
// manifest, so that syncing it takes a moment.
func publishFiles(t *testing.T, root, name string, n int) {
	t.Helper()
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "bundle.json"), []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		body := strings.Repeat(name+" file "+strconv.Itoa(i)+"\n", 200)
		if err := os.WriteFile(filepath.Join(src, fmt.Sprintf("skill-%02d.md", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := registry.Publish(root, name, src, registry.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (c *campaign) startAgent() {
	c.t.Helper()
	p := c.aw.start(c.t)
	c.ours[p.cmd.Process.Pid] = true
	c.agents = append(c.agents, p)
}

func (c *campaign) startApp(extra ...string) {
	c.t.Helper()
	exe, err := os.Executable()
	if err != nil {
		c.t.Fatal(err)
	}
	env := processEnv(os.Environ(), campaignAppEnv+"=1")
	// startProc asks for debug logs: the application logs the changes it
	// sees at debug, and the fleet's own debug lines are left out.
	p := startProc(c.t, "campaign app", exe, env, appStarted, append(c.appArgs, extra...)...)
	c.ours[p.cmd.Process.Pid] = true
	c.app = p
}

// appLine is the part of the application's log lines a kill aims by.
type appLine struct {
	Message string `json:"message"`
	Kind    string `json:"kind"`
	Event   string `json:"event"`
	To      string `json:"to"`
	Op      string `json:"op"`
}

// phase is a moment a kill can aim at, recognised in the application's
// log.
type phase struct {
	name  string
	match func(appLine) bool
}

var (
	phaseAny   = phase{name: "any"}
	phaseSpawn = phase{"spawn", func(l appLine) bool {
		return l.Message == appChange && l.Kind == string(fleet.ChangeInstanceState) && l.To == string(fleet.StateSpawning)
	}}
	phaseSync = phase{"bundle sync", func(l appLine) bool {
		return l.Message == appChange && l.Kind == string(fleet.ChangeSpawnProgress) && l.Event == "provisioning"
	}}
	phasePrompt = phase{"prompt", func(l appLine) bool {
		return l.Message == appAction && l.Op == "submit" ||
			l.Message == appChange && l.Kind == string(fleet.ChangeInstanceState) && l.To == string(fleet.StateRunning)
	}}
	phaseTaskDone = phase{"task_done", func(l appLine) bool {
		return l.Message == appDelivered || l.Message == appChange && l.Kind == string(fleet.ChangeTaskDone)
	}}
	phaseVerdict = phase{"verdict", func(l appLine) bool {
		return l.Message == appAction && (strings.HasPrefix(l.Op, "accept") || l.Op == "reject")
	}}
	allPhases = []phase{phaseAny, phaseSpawn, phaseSync, phasePrompt, phaseTaskDone, phaseVerdict}
)

// aim waits, at most phaseWait, for the application to log a line of
// phase ph (any line logged from now on), then for a random moment after
// it: up to 30 ms after an aimed-at line, up to 1.5 s for phaseAny.
// The delay is the fault schedule, not a wait for a condition.
func (c *campaign) aim(ph phase) {
	c.phases[ph.name]++
	if ph.match == nil {
		time.Sleep(time.Duration(c.rng.Int64N(int64(1500 * time.Millisecond))))
		return
	}
	c.app.mu.Lock()
	from := len(c.app.lines)
	c.app.mu.Unlock()
	switch found, exited := awaitLine(c.app, from, phaseWait, ph.match); {
	case exited:
		c.t.Fatalf("the application exited (%v) during the campaign", c.app.cmd.ProcessState)
	case !found:
		c.phases[ph.name+" (not seen)"]++
	default:
		time.Sleep(time.Duration(c.rng.Int64N(int64(30 * time.Millisecond))))
	}
}

// awaitLine waits, at most d, for p to log a line that match accepts
// (lines from index from on); exited says that p ended first.
func awaitLine(p *proc, from int, d time.Duration, match func(appLine) bool) (found, exited bool) {
	deadline := time.After(d)
	for seen := from; ; {
		p.mu.Lock()
		lines, logged := p.lines[seen:], p.logged
		seen = len(p.lines)
		p.mu.Unlock()
		for _, raw := range lines {
			var l appLine
			if json.Unmarshal([]byte(raw), &l) == nil && match(l) {
				return true, false
			}
		}
		select {
		case <-logged:
		case <-p.done:
			return false, true
		case <-deadline:
			return false, false
		}
	}
}

// lastLine returns p's last log line with message, "" when none.
func lastLine(p *proc, message string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.lines) - 1; i >= 0; i-- {
		var l appLine
		if json.Unmarshal([]byte(p.lines[i]), &l) == nil && l.Message == message {
			return p.lines[i]
		}
	}
	return ""
}

// drain runs the application's final pass: it finishes the open tasks
// and stops the workers. It reports what was still open when drainWait
// ran out ("" when it drained).
func (c *campaign) drain() (stuck string) {
	c.t.Helper()
	found, exited := awaitLine(c.app, 0, drainWait, func(l appLine) bool { return l.Message == appDrained })
	switch {
	case exited && !c.app.cmd.ProcessState.Success():
		c.t.Fatalf("the application's final run failed: %v", c.app.cmd.ProcessState)
	case !found && !exited:
		return lastLine(c.app, appWaiting)
	}
	// It exits 0 once drained (the line may still be in the pipe).
	select {
	case <-c.app.done:
	case <-time.After(procWait):
		c.t.Fatalf("the drained application did not exit")
	}
	return ""
}

// outcome is what a campaign counted.
type outcome struct {
	Kills, Tasks, TaskDones, Delivered, Redelivered, Lost, Duplicated, Stuck, Orphaned int
	// RepeatedVerdicts counts rejections the worker carried out that the
	// server has no record of (it sent one, died, and sent it again).
	RepeatedVerdicts int
	// Ends counts the tasks by final state: ended (accepted) as a rule;
	// failed is a prompt a kill lost in flight, which the task reports
	// (ErrPromptLost), aborted a run whose worker a kill took.
	Ends    map[fleet.TaskState]int
	details []string
}

func (o outcome) String() string {
	return fmt.Sprintf("kills %d, tasks %d, task_done %d, delivered %d (again with the same key: %d), lost %d, duplicated %d, stuck %d, orphaned %d, repeated verdicts %d",
		o.Kills, o.Tasks, o.TaskDones, o.Delivered, o.Redelivered, o.Lost, o.Duplicated, o.Stuck, o.Orphaned, o.RepeatedVerdicts) +
		fmt.Sprintf("; tasks ended %d, failed %d, aborted %d, stopped %d",
			o.Ends[fleet.TaskEnded], o.Ends[fleet.TaskFailed], o.Ends[fleet.TaskAborted], o.Ends[fleet.TaskStopped])
}

func (o *outcome) bad(counter *int, format string, args ...any) {
	*counter++
	o.details = append(o.details, fmt.Sprintf(format, args...))
}

// count stops the agent and counts the outcome; stuck is what drain
// reported.
func (c *campaign) count(stuck string) outcome {
	c.t.Helper()
	o := outcome{Kills: c.kills}
	if c.app != nil {
		c.app.kill9() // drained and gone, or stuck
	}
	agent := c.agents[len(c.agents)-1]
	agent.terminate(c.t)

	// Every task_done the agents logged as produced (stored in their
	// outbox) is a report the application must have heard of.
	produced := map[string]bool{}
	for _, p := range c.agents {
		p.mu.Lock()
		for _, raw := range p.lines {
			var l struct {
				Message, TaskID, InstanceID string
				Seq                         uint64
			}
			if json.Unmarshal([]byte(raw), &l) == nil && l.Message == "task done" {
				produced[fleet.TaskKey{InstanceID: l.InstanceID, TaskID: l.TaskID, Seq: int64(l.Seq)}.String()] = true
			}
		}
		p.mu.Unlock()
	}
	log, err := readDeliveryLog(c.deliveries)
	if err != nil {
		c.t.Fatal(err)
	}
	heard := map[string]int{}
	first := map[string]appDelivery{}
	keysOf := map[string]map[string]bool{}
	for _, d := range log {
		heard[d.Key]++
		if f, again := first[d.Key]; !again {
			first[d.Key] = d
		} else if f.PID == d.PID || f.Status != d.Status || f.Summary != d.Summary {
			// The contract's one repeat: the same report, handed out
			// again by the process started after the one that died.
			o.bad(&o.Duplicated, "task_done %s was handed out again by the same process or as another report: %+v, then %+v", d.Key, f, d)
		}
		if keysOf[d.Task] == nil {
			keysOf[d.Task] = map[string]bool{}
		}
		keysOf[d.Task][d.Key] = true
	}
	for key := range produced {
		if heard[key] == 0 {
			o.bad(&o.Lost, "task_done %s was stored by the agent and never handed to the application", key)
		}
	}
	for key, n := range heard {
		o.Redelivered += n - 1
		if !produced[key] && c.agentLogsComplete {
			o.bad(&o.Duplicated, "the application was handed %s, a task_done the agent never sent", key)
		}
		produced[key] = true // an agent killed before it logged it
	}
	o.TaskDones, o.Delivered = len(produced), len(heard)

	st, err := serverstore.Open(c.stateDir)
	if err != nil {
		c.t.Fatalf("open the server's state: %v", err)
	}
	defer st.Close()
	tasks, err := st.ListTasks()
	if err != nil {
		c.t.Fatal(err)
	}
	o.Tasks = len(tasks)
	o.Ends = map[fleet.TaskState]int{}
	for _, tk := range tasks {
		o.Ends[fleet.TaskState(tk.State)]++
		runs := tk.Rejects + 1 // each run of a task ends with a task_done
		switch got := len(keysOf[tk.TaskID]); {
		case !terminalTask(fleet.TaskState(tk.State)):
			o.bad(&o.Stuck, "task %s is %s", tk.TaskID, tk.State)
		case fleet.TaskState(tk.State) == fleet.TaskEnded && got < runs:
			o.bad(&o.Lost, "task %s ended after %d runs; the application heard of %d task_done", tk.TaskID, runs, got)
		case got > runs:
			// Each key is one run: the worker ran again on a rejection
			// the server did not record.
			o.bad(&o.RepeatedVerdicts, "task %s has %d rejection(s) recorded, but its worker ran %d times (task_done %v)",
				tk.TaskID, tk.Rejects, got, slices.Sorted(maps.Keys(keysOf[tk.TaskID])))
		}
	}
	if pending, _, err := st.DeliveryCounts(); err != nil || pending != 0 {
		o.bad(&o.Lost, "the server's state holds %d task_done whose notification is pending (%v)", pending, err)
	}
	instances, err := st.ListInstances()
	if err != nil {
		c.t.Fatal(err)
	}
	for _, in := range instances {
		if in.State != string(fleet.StateStopped) && in.State != string(fleet.StateFailed) {
			o.bad(&o.Stuck, "instance %s is %s", in.InstanceID, in.State)
		}
	}
	if stuck != "" {
		// Counted by what is stuck, when the state file shows it.
		var none int
		counter := &none
		if o.Stuck == 0 {
			counter = &o.Stuck
		}
		o.bad(counter, "the final run did not drain within %v: %s", drainWait, stuck)
	}
	// One orphan is a tree of processes: its root (a shim, as a rule)
	// and what runs under it.
	left := c.orphans()
	parent := map[int]int{}
	for _, p := range left {
		parent[p.PID] = p.PPID
	}
	rootOf := func(pid int) int {
		for hops := 0; hops < len(left); hops++ {
			pp, ok := parent[pid]
			if _, up := parent[pp]; !ok || !up {
				break
			}
			pid = pp
		}
		return pid
	}
	for _, p := range left {
		if _, up := parent[p.PPID]; up {
			continue
		}
		var under []string
		for _, q := range left {
			if q.PID != p.PID && rootOf(q.PID) == p.PID {
				under = append(under, q.String())
			}
		}
		o.bad(&o.Orphaned, "process %d (%s, stderr %s) outlived the campaign; under it: %s",
			p.PID, p.Cmdline, p.Stderr, strings.Join(under, ", "))
	}
	return o
}

// report logs the outcome and fails the test for every bad count.
func (c *campaign) report(name string, o outcome) {
	c.t.Helper()
	c.t.Logf("%s kill campaign, %s=%d: %s", name, envKillSeed, c.seed, o)
	var aimed []string
	for _, name := range slices.Sorted(maps.Keys(c.phases)) {
		aimed = append(aimed, fmt.Sprintf("%s %d", name, c.phases[name]))
	}
	c.t.Logf("kills aimed at: %s", strings.Join(aimed, ", "))
	for _, d := range o.details {
		c.t.Errorf("%s=%d: %s", envKillSeed, c.seed, d)
	}
}

// orphans waits, at most orphanWait, until no process the campaign
// started is left, and returns those still running then. Exited orphans
// are reaped as they are found.
func (c *campaign) orphans() []e2ekit.Proc {
	deadline := time.Now().Add(orphanWait)
	for {
		var alive []e2ekit.Proc
		for _, p := range e2ekit.Descendants(os.Getpid()) {
			switch {
			case c.before[p.PID] || c.ours[p.PID]:
			case p.State == 'Z':
				if p.PPID == os.Getpid() {
					var ws unix.WaitStatus
					_, _ = unix.Wait4(p.PID, &ws, unix.WNOHANG, nil)
				}
			default:
				alive = append(alive, p)
			}
		}
		if len(alive) == 0 || time.Now().After(deadline) {
			return alive
		}
		// A stopped worker's shim ends on its own once the agent
		// acknowledged the exit: look again shortly.
		<-time.After(50 * time.Millisecond)
	}
}

// TestKillCampaignServer kills the application's server process at
// random moments while tasks run and finish (the agent stays up), starts
// it again on the same state, and counts: every task_done the agent
// produced reaches the application's callback at least once, a repeat
// has the same key, nothing is stuck, nothing is left running.
func TestKillCampaignServer(t *testing.T) {
	kills, seed := campaignParams(t, serverCampaignByDefault)
	c := newCampaign(t, seed)
	c.agentLogsComplete = true
	c.startAgent()
	for c.kills < kills {
		c.startApp()
		c.aim(allPhases[c.rng.IntN(len(allPhases))])
		c.app.kill9()
		c.kills++
	}
	c.startApp("--drain")
	c.report("server", c.count(c.drain()))
}

// TestKillCampaignAgent kills the agent at random moments — aimed at
// spawns, bundle syncs, prompts, task_done and verdicts — while the
// application keeps its workers busy, starts it again on the same state,
// and counts the same outcomes. The server is never killed here, so no
// report may reach the application twice.
func TestKillCampaignAgent(t *testing.T) {
	kills, seed := campaignParams(t, agentCampaignByDefault)
	c := newCampaign(t, seed)
	c.startAgent()
	c.startApp()
	for c.kills < kills {
		c.aim(allPhases[c.rng.IntN(len(allPhases))])
		c.agents[len(c.agents)-1].kill9()
		c.kills++
		c.startAgent()
	}
	// The application drains on SIGUSR1.
	if err := c.app.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	o := c.count(c.drain())
	if o.Redelivered != 0 {
		o.bad(&o.Duplicated, "%d task_done reached the application again though the server never restarted", o.Redelivered)
	}
	c.report("agent", o)
}
