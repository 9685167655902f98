package fleet_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"example.com/pifleet/fleet"
	"example.com/pifleet/session"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/trust"
)

// TestScript runs the transcripts in testdata/script against a real Fleet:
// a real state directory and bbolt store, real connections on loopback
// to scripted agents (testAgentPeer), the public SDK. A transcript is a
// list of lines:
//
//	# a comment, kept
//	> agent box pifleet             a command
//	...                             what it printed, one thing a line
//
// Blank lines and comments are kept, commands are run in order, and every
// other line is recomputed; go test -run TestScript -update-transcripts
// rewrites them (the flag TestCoreTranscripts defines). Every command
// waits for what it names (a frame the peer got, an SDK call's return, a
// state in the subscription), never for a time. The commands are in
// scriptCommands; ids are printed as names (t1 for the first task id
// seen), and the fields that change from run to run (request and trace
// ids, addresses, times) are dropped.
//
// Transcripts are how the fleet's behaviour is specified: the core's
// (testdata/core, TestCoreTranscripts) for its decisions, these for what
// the driver does with them on the wire, on disk and through the SDK. A
// hand-written Go test is for what a transcript cannot say (timing and
// load, goroutines, real pi, kill campaigns). Measured with the
// transcripts of this commit (load average 0.6 to 7): go test -count=1
// -run 'TestScript|TestCore' -coverprofile covers 63.7% of the package's
// statements (TestScript alone 59.6%, TestCore alone 22.5%); the whole
// package, with -race, 91.0%.
func TestScript(t *testing.T) {
	files, err := filepath.Glob("testdata/script/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts: %v", err)
	}
	update := false
	if f := flag.Lookup("update-transcripts"); f != nil {
		update = f.Value.String() == "true"
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			want := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
			got := runScript(t, want)
			if update {
				if err := os.WriteFile(file, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("%s differs (-want +got); rerun with -update-transcripts if the change is intended:\n%s", file, d)
			}
		})
	}
}

// scriptWait bounds every wait of a transcript: it only fails a broken
// run, it never paces one.
const scriptWait = 30 * time.Second

// scriptRun is one transcript's world.
type scriptRun struct {
	t        *testing.T
	regRoot  string
	stateDir string
	peers    map[string]*scriptPeer
	order    []string   // peers in declaration order
	mu       sync.Mutex // guards tf: a restart replaces it under a call of go
	tf       *testFleet
	ids      namer
	calls    map[string]*scriptCall // go NAME …
	execMu   sync.Mutex
	execs    map[string]*fleet.Execution // by the agent's exec id
	// pending holds the state changes read from the subscription and not
	// yet printed by a wait, in order.
	pending []fleet.Change
}

// scriptPeer is a scripted agent and what the transcript asked of it.
type scriptPeer struct {
	*testAgentPeer
	mu     sync.Mutex
	hold   map[string]bool              // frame types held for the script to answer
	answer map[string]transport.Frame   // frame types answered with this frame
	held   map[string][]transport.Frame // held frames, oldest first
	spawns []func()                     // spawned answers held by "hold spawned"
	stops  []func()                     // stopped answers held by "hold stopped"
	ignore map[string]bool              // frame types recv does not print
	// backlog holds the frames a sync read past, for recv to see first.
	backlog []transport.Frame
	syncs   int
	holds   chan string // the instances whose prompt the peer holds, as it does
}

func runScript(t *testing.T, lines []string) []string {
	r := &scriptRun{t: t, regRoot: t.TempDir(), stateDir: t.TempDir(), peers: map[string]*scriptPeer{},
		calls: map[string]*scriptCall{}, execs: map[string]*fleet.Execution{}}
	publish(t, r.regRoot, "default", `{}`)
	publish(t, r.regRoot, "strict", `{"review":{"maxRejects":1}}`)
	var out []string
	for n, line := range lines {
		switch {
		case strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "":
			out = append(out, line)
		case strings.HasPrefix(line, "> "):
			out = append(out, line)
			got, err := r.run(strings.TrimPrefix(line, "> "))
			if err != nil {
				t.Fatalf("line %d: %s: %v\nthe transcript so far:\n%s", n+1, line, err, strings.Join(out, "\n"))
			}
			out = append(out, got...)
		default:
			// An expected line: recomputed.
		}
	}
	return out
}

// scriptCommands are the commands of a transcript. Arguments are words or
// Go-quoted strings; AGENT is a peer's name, INST an instance id (the
// peer mints i-<agent>-<n>), TASK a task's name (t1, …).
var scriptCommands = map[string]func(r *scriptRun, ctx context.Context, args []string) ([]string, error){
	// agent NAME pifleet|v1 [CAPABILITY…]: a scripted agent listening
	// on loopback, announcing the extra capabilities.
	"agent": (*scriptRun).cmdAgent,
	// start: a fleet over every agent declared, on the run's state
	// directory; waits until each is established. restart: Close, then
	// start on the same state directory. close: Close.
	"start":   func(r *scriptRun, _ context.Context, _ []string) ([]string, error) { return r.start() },
	"restart": func(r *scriptRun, _ context.Context, _ []string) ([]string, error) { r.close(); return r.start() },
	"close": func(r *scriptRun, _ context.Context, _ []string) ([]string, error) {
		r.close()
		return []string{"closed"}, nil
	},
	// spawn AGENT [BUNDLE] [isolated]: Spawn in /work/repo (in a worktree
	// of its own).
	"spawn": (*scriptRun).cmdSpawn,
	// prompt INST "text", submit INST "text", steer/followup INST "text",
	// abort INST, stop INST, read/diff/list/grep (cmdFiles): the Instance
	// methods.
	"prompt":   (*scriptRun).cmdPrompt,
	"submit":   (*scriptRun).cmdSubmit,
	"steer":    (*scriptRun).cmdSteer,
	"followup": (*scriptRun).cmdSteer,
	"abort":    (*scriptRun).cmdInstance,
	"stop":     (*scriptRun).cmdInstance,
	"read":     (*scriptRun).cmdFiles,
	"diff":     (*scriptRun).cmdFiles,
	"list":     (*scriptRun).cmdFiles,
	"grep":     (*scriptRun).cmdFiles,
	// search AGENT QUERY CWD, repohead AGENT CWD, stale KIND AGENT CWD
	// [HEAD]: the Fleet's questions to an agent.
	"search":   (*scriptRun).cmdAgentQuery,
	"repohead": (*scriptRun).cmdAgentQuery,
	"stale":    (*scriptRun).cmdAgentQuery,
	// exec AGENT "command line", execwait EXEC, execabort EXEC,
	// executions AGENT: the exec plane (EXEC is the agent's exec id).
	"exec":       (*scriptRun).cmdExec,
	"execwait":   (*scriptRun).cmdExec,
	"execabort":  (*scriptRun).cmdExec,
	"executions": (*scriptRun).cmdExec,
	// ui INST REQUEST VALUE: AnswerUI of a worker dialog (VALUE is JSON:
	// true, "text", null).
	"ui": (*scriptRun).cmdUI,
	// publish NAME {bundle.json}: a bundle in the run's registry.
	"publish": func(r *scriptRun, _ context.Context, args []string) ([]string, error) {
		if len(args) < 3 {
			return nil, errors.New("publish NAME {bundle.json}")
		}
		publish(r.t, r.regRoot, args[1], args[2])
		return []string{"published"}, nil
	},
	// trust AGENT POLICY: SetTrust of the agent's machine; transcript
	// INST N: the worker's last N session entries.
	"trust":      (*scriptRun).cmdTrust,
	"transcript": (*scriptRun).cmdTrust,
	// rebundle INST BUNDLE, tools INST a,b,…: switch a worker's bundle or
	// tools.
	"rebundle": (*scriptRun).cmdSwitch,
	"tools":    (*scriptRun).cmdSwitch,
	// review TASK, accept TASK keep_idle|stop, reject TASK "feedback",
	// decide TASK accept keep_idle|stop / decide TASK reject "feedback":
	// the Task methods.
	"review": (*scriptRun).cmdTask,
	// taskwait TASK: Wait; taskdone TASK: whether Done is closed, now.
	"taskwait": (*scriptRun).cmdTask,
	"taskdone": (*scriptRun).cmdTask,
	"accept":   (*scriptRun).cmdTask,
	"reject":   (*scriptRun).cmdTask,
	"decide":   (*scriptRun).cmdTask,
	// deliver TASK MODE: Deliver (task TASK shows the delivery).
	"deliver": (*scriptRun).cmdTask,
	// report: waits for the next WithTaskDone delivery. noreport: none is
	// waiting (after a sync point that would have ordered one).
	"report":   (*scriptRun).cmdReport,
	"noreport": (*scriptRun).cmdNoReport,
	// wait INST STATE | wait TASK STATE | wait agent AGENT STATE: waits in
	// the subscription for that state and prints the trail that led there;
	// wait INST event:TYPE waits for a worker event the fleet got.
	"wait": (*scriptRun).cmdWait,
	// status: the instances and tasks of Status; task TASK: its
	// TaskInfo.
	"status": (*scriptRun).cmdStatus,
	"task":   (*scriptRun).cmdTaskInfo,
	// await NAME prints the output of go NAME … once it returned; cancel
	// NAME cancels its context.
	"await":  (*scriptRun).cmdAwait,
	"cancel": (*scriptRun).cmdCancel,
}

// go NAME COMMAND…: runs a command in the background (added here: it
// runs the others).
func init() { scriptCommands["go"] = (*scriptRun).cmdGo }

func (r *scriptRun) run(line string) ([]string, error) {
	words, rest, err := splitWords(line)
	if err != nil {
		return nil, err
	}
	if len(words) == 0 {
		return nil, errors.New("empty command")
	}
	if p := r.peers[words[0]]; p != nil && len(words) > 1 {
		return r.peerCommand(p, words[1], words[2:], rest)
	}
	cmd, ok := scriptCommands[words[0]]
	if !ok {
		return nil, fmt.Errorf("unknown command %q", words[0])
	}
	if rest != "" {
		words = append(words, rest) // a JSON argument, whole
	}
	ctx, cancel := context.WithTimeout(r.t.Context(), scriptWait)
	defer cancel()
	return cmd(r, ctx, words)
}

// splitWords splits a command into words, unquoting Go-quoted ones; rest
// is the text after the first "{" (a frame's JSON), kept whole.
func splitWords(line string) (words []string, rest string, err error) {
	if i := strings.Index(line, "{"); i >= 0 {
		line, rest = line[:i], line[i:]
	}
	for s := strings.TrimSpace(line); s != ""; s = strings.TrimSpace(s) {
		if s[0] == '"' {
			q, err := strconv.QuotedPrefix(s)
			if err != nil {
				return nil, "", fmt.Errorf("quoted text %s: %w", s, err)
			}
			w, _ := strconv.Unquote(q)
			words, s = append(words, w), s[len(q):]
			continue
		}
		w, after, _ := strings.Cut(s, " ")
		words, s = append(words, w), after
	}
	return words, rest, nil
}

func (r *scriptRun) cmdAgent(ctx context.Context, args []string) ([]string, error) {
	if len(args) < 3 {
		return nil, errors.New("agent NAME pifleet|v1 [CAPABILITY…]")
	}
	name := args[1]
	sp := &scriptPeer{hold: map[string]bool{}, held: map[string][]transport.Frame{}, answer: map[string]transport.Frame{}, holds: make(chan string, 1024),
		ignore: map[string]bool{transport.TypeHello: true, transport.TypeAuthProof: true}}
	sp.testAgentPeer = newTestAgentPeer(r.t, name, args[2] == "pifleet", func(p *testAgentPeer) {
		p.script = sp.intercept
		p.spawnGate = sp.gateSpawn
		p.stopGate = sp.gateStop
		p.caps = args[3:]
		p.onHold = func(id string) {
			select {
			case sp.holds <- id:
			default:
				r.t.Error("script peer: too many prompts held")
			}
		}
	})
	r.peers[name] = sp
	r.order = append(r.order, name)
	return []string{"listening"}, nil
}

// intercept answers the frames of the types the script answers, and
// holds those it holds, unanswered.
func (sp *scriptPeer) intercept(_ *transport.Conn, fr transport.Frame, reply func(transport.Frame)) bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	for _, k := range frameKinds(fr) {
		if ans := sp.answer[k]; ans != nil {
			raw, _ := transport.MarshalFrame(ans)
			copied, _ := transport.ParseFrame(raw) // reply sets its id
			reply(copied)
			return true
		}
	}
	if !sp.hold[fr.FrameType()] {
		return false
	}
	sp.held[fr.FrameType()] = append(sp.held[fr.FrameType()], fr)
	return true
}

func (sp *scriptPeer) gateSpawn(send func()) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if !sp.hold["spawned"] {
		send()
		return
	}
	sp.spawns = append(sp.spawns, send)
}

func (sp *scriptPeer) gateStop(send func()) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if !sp.hold["stopped"] {
		send()
		return
	}
	sp.stops = append(sp.stops, send)
}

func (r *scriptRun) start() ([]string, error) {
	var agents []fleet.Agent
	for _, name := range r.order {
		agents = append(agents, fleet.Agent{Name: name, Addresses: []string{r.peers[name].Addr()}})
	}
	tf := startFleet(r.t, r.stateDir, r.regRoot, agents)
	r.mu.Lock()
	r.tf = tf
	r.mu.Unlock()
	r.pending = nil
	var out []string
	for _, name := range r.order {
		if r.peers[name].refusing() {
			continue
		}
		r.fleet().waitAgent(r.t, name, transport.StateEstablished)
		out = append(out, "agent "+name+" established")
	}
	return out, nil
}

func (sp *scriptPeer) refusing() bool {
	sp.testAgentPeer.mu.Lock()
	defer sp.testAgentPeer.mu.Unlock()
	return sp.refuse
}

// fleet is the running fleet.
func (r *scriptRun) fleet() *testFleet {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.tf
}

func (r *scriptRun) close() {
	if r.tf != nil {
		_ = r.fleet().Close()
	}
}

func (r *scriptRun) cmdSpawn(ctx context.Context, args []string) ([]string, error) {
	if len(args) < 2 {
		return nil, errors.New("spawn AGENT [BUNDLE]")
	}
	opts := fleet.SpawnOptions{Agent: args[1], Cwd: "/work/repo", Bundle: "default"}
	for _, a := range args[2:] {
		if a == "isolated" {
			opts.Isolation = &fleet.Isolation{}
		} else {
			opts.Bundle = a
		}
	}
	inst, err := r.fleet().Spawn(ctx, opts)
	if err != nil {
		return r.errLines(err), nil
	}
	out := "instance " + inst.ID() + " " + string(inst.State())
	if wt, ok := inst.Worktree(); ok {
		out += fmt.Sprintf(" worktree=%+v", wt)
	}
	return []string{out}, nil
}

func (r *scriptRun) instance(id string) (*fleet.Instance, error) {
	return r.fleet().Instance(id)
}

func (r *scriptRun) cmdPrompt(ctx context.Context, args []string) ([]string, error) {
	if len(args) < 3 {
		return nil, errors.New("prompt INST TEXT")
	}
	inst, err := r.instance(args[1])
	if err != nil {
		return r.errLines(err), nil
	}
	text, err := inst.Prompt(ctx, args[2], fleet.PromptOptions{})
	if err != nil {
		return r.errLines(err), nil
	}
	return []string{"answer " + strconv.Quote(r.ids.clean(text))}, nil
}

func (r *scriptRun) cmdSubmit(ctx context.Context, args []string) ([]string, error) {
	if len(args) < 3 {
		return nil, errors.New("submit INST TEXT")
	}
	inst, err := r.instance(args[1])
	if err != nil {
		return r.errLines(err), nil
	}
	task, err := inst.Submit(ctx, args[2], fleet.PromptOptions{})
	if err != nil {
		return r.errLines(err), nil
	}
	return []string{"task " + r.ids.name(task.ID())}, nil
}

func (r *scriptRun) cmdSteer(ctx context.Context, args []string) ([]string, error) {
	if len(args) < 3 {
		return nil, errors.New(args[0] + " INST TEXT")
	}
	inst, err := r.instance(args[1])
	if err != nil {
		return r.errLines(err), nil
	}
	if args[0] == "steer" {
		err = inst.Steer(ctx, args[2])
	} else {
		err = inst.FollowUp(ctx, args[2])
	}
	return r.okOrErr(err), nil
}

func (r *scriptRun) cmdInstance(ctx context.Context, args []string) ([]string, error) {
	if len(args) < 2 {
		return nil, errors.New(args[0] + " INST")
	}
	inst, err := r.instance(args[1])
	if err != nil {
		return r.errLines(err), nil
	}
	switch args[0] {
	case "abort":
		err = inst.Abort(ctx)
	case "stop":
		err = inst.Stop(ctx)
	}
	return r.okOrErr(err), nil
}

// cmdFiles is read INST PATH [offset=N] [limit=N], diff INST, list INST
// PATH, grep INST PATTERN GLOB.
func (r *scriptRun) cmdFiles(ctx context.Context, args []string) ([]string, error) {
	if len(args) < 2 {
		return nil, errors.New(args[0] + " INST [PATH…]")
	}
	inst, err := r.instance(args[1])
	if err != nil {
		return r.errLines(err), nil
	}
	arg := argAt(args)
	var res fleet.FileResult
	switch args[0] {
	case "read":
		var opts fleet.ReadOptions
		for _, a := range args[3:] {
			k, v, _ := strings.Cut(a, "=")
			n, err := strconv.Atoi(v)
			if err != nil || (k != "offset" && k != "limit") {
				return nil, fmt.Errorf("read option %q: want offset=N or limit=N", a)
			}
			if k == "offset" {
				opts.Offset = n
			} else {
				opts.Limit = n
			}
		}
		res, err = inst.Read(ctx, arg(2), opts)
	case "diff":
		res, err = inst.Diff(ctx, fleet.DiffOptions{})
	case "list":
		res, err = inst.List(ctx, arg(2))
	case "grep":
		res, err = inst.Grep(ctx, arg(2), arg(3))
	}
	if err != nil {
		return r.errLines(err), nil
	}
	var out []string
	if res.Text != nil {
		out = append(out, "text "+strconv.Quote(r.ids.clean(*res.Text)))
	}
	for _, e := range res.Entries {
		out = append(out, "entry "+strconv.Quote(e.Name)+" "+string(e.Kind))
	}
	if res.Truncated {
		out = append(out, "truncated")
	}
	if len(out) == 0 {
		out = append(out, "empty")
	}
	return out, nil
}

// cmdAgentQuery is search AGENT QUERY CWD (SearchSessions), repohead
// AGENT CWD, stale KIND AGENT CWD [HEAD] (IsStale of such a session).
func (r *scriptRun) cmdAgentQuery(ctx context.Context, args []string) ([]string, error) {
	arg := argAt(args)
	f := r.fleet()
	switch args[0] {
	case "search":
		hits, err := f.SearchSessions(ctx, arg(1), arg(2), arg(3))
		if err != nil {
			return r.errLines(err), nil
		}
		out := []string{fmt.Sprintf("%d hits", len(hits))}
		for _, h := range hits {
			out = append(out, fmt.Sprintf("hit %s %s %q", h.SessionID, h.Path, h.Snippet))
		}
		return out, nil
	case "repohead":
		head, err := f.RepoHead(ctx, arg(1), arg(2))
		if err != nil {
			return r.errLines(err), nil
		}
		return []string{"head " + head}, nil
	}
	rec := session.Record{Kind: session.Kind(arg(1)), Machine: arg(2), Cwd: arg(3), ServerFields: session.ServerFields{GitHead: arg(4)}}
	stale, err := f.IsStale(ctx, rec)
	if err != nil {
		return r.errLines(err), nil
	}
	return []string{fmt.Sprintf("stale=%v", stale)}, nil
}

func (r *scriptRun) cmdExec(ctx context.Context, args []string) ([]string, error) {
	if len(args) < 2 {
		return nil, errors.New(args[0] + " …")
	}
	f := r.fleet()
	switch args[0] {
	case "exec":
		if len(args) < 3 {
			return nil, errors.New("exec AGENT COMMANDLINE")
		}
		e, err := f.Exec(ctx, args[1], fleet.ExecRequest{Shell: args[2], Cwd: "/work/repo"})
		if err != nil {
			return r.errLines(err), nil
		}
		r.execMu.Lock()
		r.execs[e.ID()] = e
		r.execMu.Unlock()
		return []string{"execution " + e.ID() + " on " + e.Agent()}, nil
	case "executions":
		recs, err := f.Executions(ctx, args[1])
		if err != nil {
			return r.errLines(err), nil
		}
		out := []string{fmt.Sprintf("%d executions", len(recs))}
		for _, rec := range recs {
			out = append(out, fmt.Sprintf("exec %s %s", rec.ExecID, rec.State))
		}
		return out, nil
	}
	r.execMu.Lock()
	e := r.execs[args[1]]
	r.execMu.Unlock()
	if e == nil {
		// Not one of this run's: AbortExecution by its id.
		if args[0] == "execabort" && len(args) > 2 {
			return r.okOrErr(f.AbortExecution(ctx, args[2], args[1])), nil
		}
		return nil, fmt.Errorf("no execution %s", args[1])
	}
	if args[0] == "execabort" {
		return r.okOrErr(e.Abort(ctx)), nil
	}
	res, err := e.Wait(ctx)
	if err != nil {
		return r.errLines(err), nil
	}
	exit := "none"
	if res.ExitCode != nil {
		exit = strconv.Itoa(*res.ExitCode)
	}
	return []string{fmt.Sprintf("ended exit=%s signal=%q timedOut=%v aborted=%v", exit, res.Signal, res.TimedOut, res.Aborted),
		"stdout " + strconv.Quote(string(res.Stdout)), "stderr " + strconv.Quote(string(res.Stderr))}, nil
}

func (r *scriptRun) cmdSwitch(ctx context.Context, args []string) ([]string, error) {
	if len(args) < 3 {
		return nil, errors.New(args[0] + " INST …")
	}
	inst, err := r.instance(args[1])
	if err != nil {
		return r.errLines(err), nil
	}
	if args[0] == "rebundle" {
		return r.okOrErr(inst.Rebundle(ctx, args[2])), nil
	}
	tools, err := inst.SetTools(ctx, strings.Split(args[2], ","))
	if err != nil {
		return r.errLines(err), nil
	}
	return []string{"tools " + strings.Join(tools, ",")}, nil
}

func (r *scriptRun) cmdTrust(ctx context.Context, args []string) ([]string, error) {
	if len(args) < 3 {
		return nil, errors.New(args[0] + " … …")
	}
	if args[0] == "trust" {
		d, err := r.fleet().SetTrust(args[1], trust.Policy(args[2]))
		if err != nil {
			return r.errLines(err), nil
		}
		return []string{"policy " + string(d.Policy)}, nil
	}
	inst, err := r.instance(args[1])
	if err != nil {
		return r.errLines(err), nil
	}
	n, err := strconv.Atoi(args[2])
	if err != nil {
		return nil, fmt.Errorf("transcript INST N: %w", err)
	}
	entries, more, err := inst.Transcript(ctx, n)
	if err != nil {
		return r.errLines(err), nil
	}
	return []string{fmt.Sprintf("%d entries more=%v", len(entries), more)}, nil
}

func (r *scriptRun) cmdUI(ctx context.Context, args []string) ([]string, error) {
	if len(args) < 4 {
		return nil, errors.New("ui INST REQUEST VALUE")
	}
	var v any
	if err := json.Unmarshal([]byte(args[3]), &v); err != nil {
		return nil, fmt.Errorf("ui value %s: %w", args[3], err)
	}
	return r.okOrErr(r.fleet().AnswerUI(ctx, args[1], args[2], v)), nil
}

func (r *scriptRun) task(name string) (*fleet.Task, error) {
	id, ok := r.ids.real(name)
	if !ok {
		return nil, fmt.Errorf("no task %s yet", name)
	}
	return r.fleet().Task(id)
}

func (r *scriptRun) cmdTask(ctx context.Context, args []string) ([]string, error) {
	if len(args) < 2 {
		return nil, errors.New(args[0] + " TASK …")
	}
	task, err := r.task(args[1])
	if err != nil {
		return r.errLines(err), nil
	}
	arg := argAt(args)
	switch args[0] {
	case "taskwait":
		ti, err := task.Wait(ctx)
		if err != nil {
			return r.errLines(err), nil
		}
		return []string{fmt.Sprintf("waited %s last_done=%v", r.formatTask(ti), ti.LastDone != nil)}, nil
	case "taskdone":
		select {
		case <-task.Done():
			return []string{"done"}, nil
		default:
			return []string{"not done"}, nil
		}
	case "deliver":
		d, err := task.Deliver(ctx, fleet.DeliverOptions{Mode: transport.DeliveryMode(arg(2))})
		if err != nil {
			return r.errLines(err), nil
		}
		return []string{fmt.Sprintf("delivered %s branch=%s commit=%s", d.Mode, d.Branch, d.Commit)}, nil
	case "review":
		err = task.StartReview(ctx)
	case "accept":
		err = task.Accept(ctx, transport.Disposition(arg(2)))
	case "reject":
		escalated, err := task.Reject(ctx, arg(2))
		if err != nil {
			return r.errLines(err), nil
		}
		return []string{fmt.Sprintf("ok escalated=%v", escalated)}, nil
	case "decide":
		v := fleet.Verdict{Accept: arg(2) == "accept"}
		if v.Accept {
			v.Disposition = transport.Disposition(arg(3))
		} else {
			v.Feedback = arg(3)
		}
		err = task.Decide(ctx, v)
	}
	return r.okOrErr(err), nil
}

func (r *scriptRun) cmdReport(ctx context.Context, _ []string) ([]string, error) {
	for {
		select {
		case rep := <-r.fleet().reports:
			if strings.HasPrefix(rep.TaskID, syncTask+"-") {
				continue
			}
			return []string{r.formatReport(rep)}, nil
		case <-ctx.Done():
			return nil, errors.New("no task_done delivered")
		}
	}
}

func (r *scriptRun) cmdNoReport(ctx context.Context, _ []string) ([]string, error) {
	for {
		select {
		case rep := <-r.fleet().reports:
			if strings.HasPrefix(rep.TaskID, syncTask+"-") {
				continue
			}
			return []string{"unexpected " + r.formatReport(rep)}, nil
		default:
			return []string{"none"}, nil
		}
	}
}

func (r *scriptRun) formatReport(rep fleet.TaskReport) string {
	return fmt.Sprintf("report %s %s %s seq=%d %q", r.ids.name(rep.TaskID), rep.InstanceID, rep.Status, rep.Seq,
		r.ids.clean(rep.Summary))
}

// cmdWait waits in the subscription for a state of an instance, a task
// or an agent, and prints every state it went through since the last
// wait on it (the trail); a state reached before is found in the trail
// already read.
func (r *scriptRun) cmdWait(ctx context.Context, args []string) ([]string, error) {
	kind, subject, state := fleet.ChangeInstanceState, "", ""
	switch {
	case len(args) == 4 && args[1] == "agent":
		kind, subject, state = fleet.ChangeAgentState, args[2], args[3]
	case len(args) == 3 && strings.HasPrefix(args[1], "i-") && strings.HasPrefix(args[2], "event:"):
		kind, subject, state = fleet.ChangeEvent, args[1], strings.TrimPrefix(args[2], "event:")
	case len(args) == 3 && strings.HasPrefix(args[1], "i-"):
		subject, state = args[1], args[2]
	case len(args) == 3:
		kind, state = fleet.ChangeTaskState, args[2]
		id, ok := r.ids.real(args[1])
		if !ok {
			return nil, fmt.Errorf("no task %s yet", args[1])
		}
		subject = id
	default:
		return nil, errors.New("wait INST STATE | wait TASK STATE | wait agent AGENT STATE")
	}
	of := func(c fleet.Change) bool {
		if c.Kind != kind {
			return false
		}
		switch kind {
		case fleet.ChangeAgentState:
			return c.Agent == subject
		case fleet.ChangeTaskState:
			return c.TaskID == subject
		}
		return c.InstanceID == subject
	}
	timeout := time.After(scriptWait)
	for {
		for i, c := range r.pending {
			reached := c.To == state
			if c.Kind == fleet.ChangeEvent {
				reached = c.Event == state
			}
			if of(c) && reached {
				var trail []string
				rest := r.pending[:0:0]
				for _, c := range r.pending[:i+1] {
					if of(c) {
						trail = append(trail, c.To)
					} else {
						rest = append(rest, c)
					}
				}
				r.pending = append(rest, r.pending[i+1:]...)
				if kind == fleet.ChangeEvent {
					trail = []string{"event " + state}
				}
				if kind == fleet.ChangeAgentState {
					// How often a redial failed first is the scheduler's:
					// an agent's wait says only where it got.
					trail = trail[len(trail)-1:]
				}
				return []string{args[len(args)-2] + ": " + strings.Join(trail, " ")}, nil
			}
		}
		select {
		case c, ok := <-r.fleet().sub.C:
			if !ok {
				return nil, errors.New("subscription closed")
			}
			switch c.Kind {
			case fleet.ChangeInstanceState, fleet.ChangeTaskState, fleet.ChangeAgentState, fleet.ChangeEvent:
				r.pending = append(r.pending, c)
			}
		case <-timeout:
			return nil, fmt.Errorf("no %s %s; status: %+v", subject, state, r.fleet().Status(context.Background()))
		}
	}
}

func (r *scriptRun) cmdStatus(ctx context.Context, _ []string) ([]string, error) {
	st := r.fleet().Status(ctx)
	// No agents: while one is down, whether the fleet is redialling it
	// at that moment is the scheduler's (wait agent says where one got).
	var out []string
	for _, in := range st.Instances {
		s := fmt.Sprintf("instance %s %s %s bundle=%s", r.ids.clean(in.InstanceID), in.Agent, in.State, in.Bundle)
		if in.OpenTask != "" {
			s += " task=" + r.ids.name(in.OpenTask)
		}
		if in.EndReason != "" {
			s += " ended=" + strconv.Quote(r.ids.clean(in.EndReason))
		}
		out = append(out, s)
		for _, ui := range in.PendingUI {
			out = append(out, fmt.Sprintf("  dialog %s %s %q", ui.RequestID, ui.Kind, ui.Title))
		}
	}
	for _, ti := range st.Tasks {
		out = append(out, r.formatTask(ti))
	}
	return out, nil
}

func (r *scriptRun) formatTask(ti fleet.TaskInfo) string {
	s := fmt.Sprintf("task %s %s %s rejects=%d/%d", r.ids.name(ti.TaskID), ti.InstanceID, ti.State, ti.Rejects, ti.MaxRejects)
	if ti.Verdict != "" {
		s += " verdict=" + ti.Verdict
	}
	return s
}

func (r *scriptRun) cmdTaskInfo(ctx context.Context, args []string) ([]string, error) {
	if len(args) < 2 {
		return nil, errors.New("task TASK")
	}
	task, err := r.task(args[1])
	if err != nil {
		return r.errLines(err), nil
	}
	ti := task.Info()
	out := []string{r.formatTask(ti)}
	for _, fb := range ti.Feedback {
		out = append(out, fmt.Sprintf("feedback %q", fb.Text))
	}
	if d := ti.Delivery; d != nil {
		out = append(out, fmt.Sprintf("delivery %s branch=%s commit=%s", d.Mode, d.Branch, d.Commit))
	}
	return out, nil
}

func (r *scriptRun) cmdGo(ctx context.Context, args []string) ([]string, error) {
	if len(args) < 3 {
		return nil, errors.New("go NAME COMMAND…")
	}
	name, cmd := args[1], scriptCommands[args[2]]
	if cmd == nil || args[2] == "wait" { // the subscription is the main loop's
		return nil, fmt.Errorf("no background command %q", args[2])
	}
	if _, dup := r.calls[name]; dup {
		return nil, fmt.Errorf("call %s is running", name)
	}
	callCtx, cancel := context.WithTimeout(r.t.Context(), scriptWait)
	call := &scriptCall{cancel: cancel, done: make(chan []string, 1)}
	r.calls[name] = call
	go func() {
		defer cancel()
		out, err := cmd(r, callCtx, args[2:])
		if err != nil {
			out = []string{"command failed: " + err.Error()}
		}
		call.done <- out
	}()
	return nil, nil
}

// scriptCall is a command running in the background.
type scriptCall struct {
	cancel context.CancelFunc
	done   chan []string // its output, once it returned
}

// cmdCancel cancels the context of go NAME's call (await prints what it
// returned).
func (r *scriptRun) cmdCancel(_ context.Context, args []string) ([]string, error) {
	if len(args) < 2 || r.calls[args[1]] == nil {
		return nil, errors.New("cancel NAME of a running call")
	}
	r.calls[args[1]].cancel()
	return nil, nil
}

func (r *scriptRun) cmdAwait(ctx context.Context, args []string) ([]string, error) {
	if len(args) < 2 {
		return nil, errors.New("await NAME")
	}
	call, ok := r.calls[args[1]]
	if !ok {
		return nil, fmt.Errorf("no call %s", args[1])
	}
	delete(r.calls, args[1])
	select {
	case out := <-call.done:
		return out, nil
	case <-time.After(scriptWait):
		return nil, fmt.Errorf("call %s did not return", args[1])
	}
}

// peerCommand is AGENT VERB …:
//
//	recv TYPE          waits for a frame of TYPE, printing every frame got before it
//	send {json}        sends a frame ($t1 is task t1's id)
//	hold TYPE          holds frames of TYPE unanswered (spawned, stopped: the answers)
//	release TYPE       answers the held ones as the peer would have
//	reply TYPE {json}  answers the oldest held frame of TYPE with the frame
//	answer TYPE {json} answers every frame of TYPE with the frame
//	hold prompts / release prompts   prompts start but settle only when released
//	held INST          waits until the peer holds a prompt of INST
//	discard prompts    the held prompts never settle, new ones do
//	spawn_error CODE "message"       answers every spawn with a spawn_error
//	sync               waits until the fleet handled every frame sent before
//	drop               closes the connection (the fleet redials)
//	down / up          refuses connections (closing the one it has) / accepts again
//	forget INST / state INST STATE   what the peer lists of a worker
//	ignore TYPE…       recv does not print frames of these types
func (r *scriptRun) peerCommand(p *scriptPeer, verb string, args []string, rest string) ([]string, error) {
	arg := argAt(args)
	switch verb {
	case "recv":
		return r.recv(p, arg(0))
	case "send":
		fr, err := r.frame(rest)
		if err != nil {
			return nil, err
		}
		p.send(p.conn(), fr)
		return nil, nil
	case "hold":
		if arg(0) == "prompts" {
			p.testAgentPeer.mu.Lock()
			p.holdPrompts = true
			p.testAgentPeer.mu.Unlock()
			return nil, nil
		}
		p.mu.Lock()
		p.hold[arg(0)] = true
		p.mu.Unlock()
		return nil, nil
	case "release":
		return nil, p.release(arg(0))
	case "held":
		for {
			select {
			case id := <-p.holds:
				if id == arg(0) {
					return nil, nil
				}
			case <-time.After(scriptWait):
				return nil, fmt.Errorf("%s holds no prompt of %s", p.machine, arg(0))
			}
		}
	case "discard": // discard prompts: held ones never settle; new ones run
		p.testAgentPeer.mu.Lock()
		p.holdPrompts, p.testAgentPeer.held = false, map[string]peerRun{}
		p.testAgentPeer.mu.Unlock()
		return nil, nil
	case "reply":
		p.mu.Lock()
		held := p.held[arg(0)]
		var fr transport.Frame
		if len(held) > 0 {
			fr, p.held[arg(0)] = held[0], held[1:]
		}
		p.mu.Unlock()
		if fr == nil {
			return nil, fmt.Errorf("no %s frame held", arg(0))
		}
		ans, err := r.frame(rest)
		if err != nil {
			return nil, err
		}
		ans.Envelope().ID = fr.Envelope().ID
		p.send(p.conn(), ans)
		return nil, nil
	case "answer": // without a frame: answered as the peer would
		var ans transport.Frame
		if rest != "" {
			var err error
			if ans, err = r.frame(rest); err != nil {
				return nil, err
			}
		}
		p.mu.Lock()
		p.answer[arg(0)] = ans
		p.mu.Unlock()
		return nil, nil
	case "spawn_error": // with no code: spawns succeed again
		p.testAgentPeer.mu.Lock()
		p.spawnError = &transport.SpawnErrorFrame{Code: arg(0), Message: arg(1)}
		if arg(0) == "" {
			p.spawnError = nil
		}
		p.testAgentPeer.mu.Unlock()
		return nil, nil
	case "sync":
		return nil, r.sync(p)
	case "drop":
		if c := p.conn(); c != nil {
			_ = c.Close()
		}
		return nil, nil
	case "down":
		p.setRefuse(true)
		return nil, nil
	case "up":
		p.setRefuse(false)
		return nil, nil
	case "forget":
		p.forget(arg(0))
		return nil, nil
	case "state":
		p.setState(arg(0), transport.InstanceState(arg(1)))
		return nil, nil
	case "ignore":
		p.mu.Lock()
		for _, typ := range args {
			p.ignore[typ] = true
		}
		p.mu.Unlock()
		return nil, nil
	}
	return nil, fmt.Errorf("unknown agent command %q", verb)
}

func (sp *scriptPeer) release(what string) error {
	switch what {
	case "prompts":
		sp.releaseHeld()
		return nil
	case "spawned", "stopped":
		sp.mu.Lock()
		var sends []func()
		if what == "spawned" {
			sends, sp.spawns = sp.spawns, nil
		} else {
			sends, sp.stops = sp.stops, nil
		}
		delete(sp.hold, what)
		sp.mu.Unlock()
		for _, send := range sends {
			send()
		}
		return nil
	}
	sp.mu.Lock()
	delete(sp.hold, what)
	held := sp.held[what]
	delete(sp.held, what)
	sp.mu.Unlock()
	for _, fr := range held {
		sp.respond(sp.conn(), fr)
	}
	return nil
}

// recv waits for the next frame of type typ the peer got, printing it and
// every frame before it that is not ignored. An rpc is also of type
// rpc:COMMAND (rpc:get_state).
func (r *scriptRun) recv(p *scriptPeer, typ string) ([]string, error) {
	var out []string
	for {
		fr, err := p.next()
		if err != nil {
			return nil, fmt.Errorf("%s got no %s frame (%w); got %v", p.machine, typ, err, out)
		}
		kinds := frameKinds(fr)
		p.mu.Lock()
		ignored := slices.ContainsFunc(kinds, func(k string) bool { return p.ignore[k] })
		p.mu.Unlock()
		match := slices.Contains(kinds, typ)
		if !ignored || match {
			out = append(out, p.machine+" <- "+r.formatFrame(fr))
		}
		if match {
			return out, nil
		}
	}
}

// next is the next frame the peer got: the backlog's first.
func (sp *scriptPeer) next() (transport.Frame, error) {
	if len(sp.backlog) > 0 {
		fr := sp.backlog[0]
		sp.backlog = sp.backlog[1:]
		return fr, nil
	}
	select {
	case fr := <-sp.frames:
		return fr, nil
	case <-time.After(scriptWait):
		return nil, errors.New("timed out")
	}
}

// sync returns once the fleet handled every frame the peer sent before:
// it sends a task_done of a task of its own (syncTask) and waits for its
// ack, keeping the frames before the ack for recv. The fleet handles an
// agent's frames in order, and a report of a task it does not know moves
// nothing; the runner does not print its delivery.
func (r *scriptRun) sync(p *scriptPeer) error {
	p.syncs++
	id := fmt.Sprintf("%s-%d", syncTask, p.syncs)
	p.send(p.conn(), &transport.TaskDoneFrame{TaskID: id, InstanceID: "i-sync", Seq: float64(p.syncs),
		Status: transport.TaskSettled, Summary: "sync"})
	var before []transport.Frame
	for {
		fr, err := p.next()
		if err != nil {
			return fmt.Errorf("sync: %w", err)
		}
		if ack, ok := fr.(*transport.TaskDoneAckFrame); ok && ack.TaskID == id {
			p.backlog = append(p.backlog, before...)
			return nil
		}
		before = append(before, fr)
	}
}

// syncTask names the tasks of sync.
const syncTask = "sync"

// frameKinds are the names recv and ignore know a frame by: its type,
// and for an rpc rpc:COMMAND too.
func frameKinds(fr transport.Frame) []string {
	kinds := []string{fr.FrameType()}
	if rpc, ok := fr.(*transport.RPCFrame); ok {
		var cmd struct{ Type string }
		_ = json.Unmarshal(rpc.Command, &cmd)
		kinds = append(kinds, "rpc:"+cmd.Type)
	}
	return kinds
}

// volatileFields are frame fields that differ from run to run.
var volatileFields = map[string]bool{"id": true, "traceId": true, "env": true, "bundleHash": true,
	"challenge": true, "keyProof": true}

// formatFrame prints a frame as its JSON with the volatile fields
// dropped and the ids named.
func (r *scriptRun) formatFrame(fr transport.Frame) string {
	raw, err := transport.MarshalFrame(fr)
	if err != nil {
		return "unprintable " + fr.FrameType() + ": " + err.Error()
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "unprintable " + fr.FrameType() + ": " + err.Error()
	}
	v = dropVolatile(v)
	out, _ := json.Marshal(v)
	return r.ids.clean(string(out))
}

func dropVolatile(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if volatileFields[k] {
				delete(v, k)
				continue
			}
			v[k] = dropVolatile(e)
		}
	case []any:
		for i, e := range v {
			v[i] = dropVolatile(e)
		}
	}
	return v
}

// frame parses a frame the script sends, its task names replaced by
// their ids.
func (r *scriptRun) frame(js string) (transport.Frame, error) {
	js = taskName.ReplaceAllStringFunc(js, func(s string) string {
		if id, ok := r.ids.real(s[1:]); ok {
			return id
		}
		return s
	})
	var m map[string]any
	if err := json.Unmarshal([]byte(js), &m); err != nil {
		return nil, fmt.Errorf("frame %s: %w", js, err)
	}
	if _, ok := m["v"]; !ok {
		m["v"] = 1 // the protocol version, which a script need not say
	}
	raw, _ := json.Marshal(m)
	return transport.ParseFrame(raw)
}

var taskName = regexp.MustCompile(`\$t[0-9]+`)

// okOrErr prints a call's result.
func (r *scriptRun) okOrErr(err error) []string {
	if err != nil {
		return r.errLines(err)
	}
	return []string{"ok"}
}

// errLines prints an error: its message and the types along its chain
// that are the project's, which is what a caller can test with
// errors.As (and the sentinels of errors.Is it matches).
func (r *scriptRun) errLines(err error) []string {
	var types []string
	for e := err; e != nil; e = errors.Unwrap(e) {
		ty := reflect.TypeOf(e)
		named := ty
		if named.Kind() == reflect.Pointer {
			named = named.Elem()
		}
		if strings.HasPrefix(named.PkgPath(), "example.com/pifleet/") {
			types = append(types, ty.String())
		}
	}
	for _, s := range errorSentinels {
		if errors.Is(err, s.err) {
			types = append(types, s.name)
		}
	}
	line := "error " + strconv.Quote(r.ids.clean(err.Error()))
	if len(types) > 0 {
		line += " (" + strings.Join(slices.Compact(types), ", ") + ")"
	}
	return []string{line}
}

// errorSentinels are the errors errLines names when errors.Is matches.
var errorSentinels = []struct {
	err  error
	name string
}{
	{fleet.ErrClosed, "ErrClosed"}, {fleet.ErrUnknownAgent, "ErrUnknownAgent"},
	{fleet.ErrUnknownInstance, "ErrUnknownInstance"}, {fleet.ErrUnknownTask, "ErrUnknownTask"},
	{fleet.ErrNotConnected, "ErrNotConnected"}, {fleet.ErrInvalidState, "ErrInvalidState"},
	{fleet.ErrInstanceEnded, "ErrInstanceEnded"}, {fleet.ErrWorkerGone, "ErrWorkerGone"},
	{fleet.ErrPromptLost, "ErrPromptLost"}, {fleet.ErrSpawn, "ErrSpawn"}, {fleet.ErrSpawnStopped, "ErrSpawnStopped"},
	{fleet.ErrFileService, "ErrFileService"}, {fleet.ErrNotSupported, "ErrNotSupported"},
	{fleet.ErrInvalidConfig, "ErrInvalidConfig"}, {fleet.ErrExecFailed, "ErrExecFailed"},
	{fleet.ErrUnknownExecution, "ErrUnknownExecution"}, {fleet.ErrUnknownUIRequest, "ErrUnknownUIRequest"},
	{fleet.ErrUIRequestExpired, "ErrUIRequestExpired"}, {fleet.ErrBadDisposition, "ErrBadDisposition"},
	{fleet.ErrRebundle, "ErrRebundle"}, {fleet.ErrDelivery, "ErrDelivery"},
	{fleet.ErrBadDeliveryMode, "ErrBadDeliveryMode"}, {fleet.ErrUnexpectedAnswer, "ErrUnexpectedAnswer"},
	{trust.ErrPolicyRefused, "trust.ErrPolicyRefused"}, {trust.ErrBadPolicy, "trust.ErrBadPolicy"},
	{transport.ErrClosed, "transport.ErrClosed"},
	{context.Canceled, "context.Canceled"}, {context.DeadlineExceeded, "context.DeadlineExceeded"},
}

// namer names the ids minted by the fleet (tasks, spawns) in the order
// they were first seen, so that a transcript says t1 where the run had
// t-mf3x…-a1b2c3 (and spawn1 for a spawn's id).
type namer struct {
	mu    sync.Mutex
	names map[string]string
	ids   map[string]string
	count map[string]int // names given, by prefix
}

var (
	taskID    = regexp.MustCompile(`t-[0-9a-z]+-[0-9a-f]{6}`)
	spawnID   = regexp.MustCompile(`spawn-[0-9a-f]+-[0-9a-f]+`)
	loopback  = regexp.MustCompile(`127\.0\.0\.1:[0-9]+`)
	traceID   = regexp.MustCompile(`tr-[0-9a-f]{16}`)
	tempPaths = regexp.MustCompile(`/tmp/[^ "]*`)
)

func (n *namer) name(id string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.names == nil {
		n.names, n.ids, n.count = map[string]string{}, map[string]string{}, map[string]int{}
	}
	if name, ok := n.names[id]; ok {
		return name
	}
	prefix := "t"
	if strings.HasPrefix(id, "spawn-") {
		prefix = "spawn"
	}
	n.count[prefix]++
	name := prefix + strconv.Itoa(n.count[prefix])
	n.names[id], n.ids[name] = name, id
	return name
}

func (n *namer) real(name string) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	id, ok := n.ids[name]
	return id, ok
}

// clean names the task and spawn ids in s and drops what differs
// between runs.
func (n *namer) clean(s string) string {
	s = taskID.ReplaceAllStringFunc(s, n.name)
	s = spawnID.ReplaceAllStringFunc(s, n.name)
	s = loopback.ReplaceAllString(s, "ADDR")
	s = traceID.ReplaceAllString(s, "TRACE")
	return tempPaths.ReplaceAllString(s, "TMP")
}

// argAt returns a command's argument getter: arg(i) is args[i], or "" past
// the end.
func argAt(args []string) func(int) string {
	return func(i int) string {
		if i < len(args) {
			return args[i]
		}
		return ""
	}
}
