package fleet

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"example.com/pifleet/transport"
)

var updateTranscripts = flag.Bool("update-transcripts", false, "rewrite the expected output of testdata/core/*.txt")

// TestCoreTranscripts runs the decision core on the transcripts in
// testdata/core. A transcript is a list of lines:
//
//	# a comment, kept
//	view instance=idle connected pifleet max=3   sets the view
//	> submit t1                                  one input
//	open t1                                      the plan decide returns, one effect a line
//	= instance=running task=t1:running ...       the view once the plan was carried out
//
// Each input is followed by its plan (or "refused") and the view after
// it; the next input starts from that view. connection_lost drops
// "connected" from the view before the core sees it, and a snapshot (the
// reconcile after a reconnect) puts it back. go test -run
// TestCoreTranscripts -update-transcripts rewrites the expected lines.
func TestCoreTranscripts(t *testing.T) {
	files, err := filepath.Glob("testdata/core/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			want := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
			got := runTranscript(t, want, nil)
			if *updateTranscripts {
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

// runTranscript keeps the comments, views and inputs of lines and
// recomputes everything else; fired (when not nil) hears of every edge
// of the instance table a plan fires.
func runTranscript(t *testing.T, lines []string, fired func(from InstanceState, ev InstanceEvent)) []string {
	var out []string
	var v coreView
	lastReview := false
	for n, line := range lines {
		switch {
		case strings.HasPrefix(line, "#") || strings.TrimSpace(line) == "":
			out = append(out, line)
		case strings.HasPrefix(line, "view "):
			var err error
			if v, err = parseView(strings.TrimPrefix(line, "view ")); err != nil {
				t.Fatalf("line %d: %v", n+1, err)
			}
			out = append(out, "view "+formatView(v))
		case strings.HasPrefix(line, "> "):
			in, err := parseInput(strings.TrimPrefix(line, "> "))
			if err != nil {
				t.Fatalf("line %d: %v", n+1, err)
			}
			switch in.Kind {
			case inRecorded:
				in.Review = lastReview && !in.Duplicate
			case inConnLost, inSpawnLost:
				v.Connected = false // as the driver drops the connection first
			case inSnapshot:
				v.Connected = true // taken over the new connection
			}
			out = append(out, line)
			plan, ok := decide(v, in)
			if !ok {
				out = append(out, "refused")
				continue
			}
			if len(plan) == 0 {
				out = append(out, "nothing")
			}
			from := v.Instance
			for _, e := range plan {
				out = append(out, e.String())
				if e.Kind == fxRecord {
					lastReview = e.Review
				}
				if e.Kind == fxInstance && fired != nil {
					fired(from, e.Event)
					from, _ = InstanceTable.Next(from, e.Event)
				}
			}
			v = v.after(plan)
			out = append(out, "= "+formatView(v))
		default:
			// An expected line: recomputed.
		}
	}
	return out
}

func parseView(s string) (coreView, error) {
	var v coreView
	for _, f := range strings.Fields(s) {
		k, val, _ := strings.Cut(f, "=")
		switch k {
		case "instance":
			v.Instance = InstanceState(val)
		case "task":
			id, st, _ := strings.Cut(val, ":")
			v.TaskID, v.Task = id, TaskState(st)
		case "rejects":
			v.Rejects, _ = strconv.Atoi(val)
		case "max":
			v.MaxRejects, _ = strconv.Atoi(val)
		case "connected":
			v.Connected = true
		case "pifleet":
			v.Pifleet = true
		case "pending":
			v.FeedbackPending = true
		case "started":
			v.RunStarted = true
		case "incomplete":
			v.ReplayIncomplete = true
		case "inflight":
			v.RunInFlight = true
		case "spawning":
			v.Spawning = true
		case "sent":
			v.SpawnSent = true
		case "spawncancel":
			v.SpawnCancel = true
		case "intent":
			v.Intent = true
		default:
			return v, fmt.Errorf("unknown view field %q", f)
		}
	}
	if _, err := InstanceTable.Restore(v.Instance); err != nil {
		return v, err
	}
	return v, nil
}

func formatView(v coreView) string {
	s := "instance=" + string(v.Instance)
	if v.TaskID != "" {
		s += " task=" + v.TaskID + ":" + string(v.Task)
	}
	s += fmt.Sprintf(" rejects=%d max=%d", v.Rejects, v.MaxRejects)
	for _, f := range []struct {
		on   bool
		name string
	}{{v.Connected, "connected"}, {v.Pifleet, "pifleet"}, {v.FeedbackPending, "pending"}, {v.RunStarted, "started"}, {v.ReplayIncomplete, "incomplete"}, {v.RunInFlight, "inflight"},
		{v.Spawning, "spawning"}, {v.SpawnSent, "sent"}, {v.SpawnCancel, "spawncancel"}, {v.Intent, "intent"}} {
		if f.on {
			s += " " + f.name
		}
	}
	return s
}

// parseInput reads "kind args…"; a quoted argument is a text.
func parseInput(s string) (coreInput, error) {
	kind, rest, _ := strings.Cut(s, " ")
	in := coreInput{Kind: inputKind(kind)}
	var text string
	if i := strings.Index(rest, `"`); i >= 0 {
		q, err := strconv.Unquote(rest[i:])
		if err != nil {
			return in, fmt.Errorf("text %s: %w", rest[i:], err)
		}
		text, rest = q, rest[:i]
	}
	args := strings.Fields(rest)
	arg := func(i int) string {
		if i < len(args) {
			return args[i]
		}
		return ""
	}
	switch in.Kind {
	case inSubmit, inTaskDone:
		in.TaskID = arg(0)
	case inRecorded:
		in.TaskID = arg(0)
		in.Duplicate = arg(1) == "duplicate"
	case inAccept, inRestore:
		in.Disposition, in.By = transport.Disposition(arg(0)), "application"
	case inReject:
		in.Text = text
	case inDecide:
		in.Accept = arg(0) == "accept"
		in.Disposition, in.Text = transport.Disposition(arg(1)), text
	case inSnapshot:
		in.Streaming = arg(0) == "streaming"
	case inWorkerGone, inWorkerExited:
		in.Reason = text
		in.SessionPath = sessionArg(args)
		in.Stopped = slices.Contains(args, "stopped")
	case inStopped:
		in.Forced = arg(0) == "forced"
		in.SessionPath = sessionArg(args)
	case inStopRefused:
		in.Code = arg(0)
	case inSpawnProgress:
		in.Phase = transport.SpawnPhase(arg(0))
	case inSpawnError:
		in.Code, in.Text = arg(0), text
	case inListedSpawn:
		in.Recorded, in.Own, in.Clone = slices.Contains(args, "recorded"), slices.Contains(args, "own"), slices.Contains(args, "clone")
		in.Answering, in.Running = slices.Contains(args, "answering"), slices.Contains(args, "running")
	case inReview, inAbort, inStop, inSettled, inAbortTimeout, inConnLost, inPrompt,
		inSpawn, inSpawned, inSpawnCancel, inSpawnLost:
	default:
		return in, fmt.Errorf("unknown input %q", kind)
	}
	return in, nil
}

// sessionArg is the value of a "session=PATH" argument, "" when none.
func sessionArg(args []string) string {
	for _, a := range args {
		if p, ok := strings.CutPrefix(a, "session="); ok {
			return p
		}
	}
	return ""
}

// TestCoreRefusesWhatTheTablesRefuse: whatever the view, a plan fires
// only edges of the tables, each from the state the previous one left.
func TestCoreRefusesWhatTheTablesRefuse(t *testing.T) {
	inputs := []coreInput{
		{Kind: inSubmit, TaskID: "t"}, {Kind: inPrompt}, {Kind: inTaskDone, TaskID: "t"}, {Kind: inRecorded, TaskID: "t", Review: true},
		{Kind: inRecorded, TaskID: "t", Duplicate: true}, {Kind: inReview},
		{Kind: inAccept, Disposition: transport.DispositionKeepIdle, By: "application"},
		{Kind: inAccept, Disposition: transport.DispositionStop, By: "application"},
		{Kind: inReject, Text: "no"}, {Kind: inDecide, Accept: true, Disposition: transport.DispositionStop},
		{Kind: inDecide, Text: "again"}, {Kind: inAbort}, {Kind: inStop}, {Kind: inWorkerGone, Reason: "x"},
		{Kind: inSnapshot}, {Kind: inSnapshot, Streaming: true}, {Kind: inSettled}, {Kind: inAbortTimeout},
		{Kind: inRestore, Disposition: transport.DispositionKeepIdle},
		{Kind: inStopped}, {Kind: inStopped, Forced: true, SessionPath: "/s"}, {Kind: inStopRefused, Code: codeUnknownInstance},
		{Kind: inStopRefused, Code: "unknown_task"}, {Kind: inWorkerGone, Stopped: true, Reason: "agent reports it stopped"}, {Kind: inWorkerExited, Reason: "x", SessionPath: "/s"}, {Kind: inConnLost},
		{Kind: inSpawn}, {Kind: inSpawnProgress, Phase: transport.SpawnAccepted}, {Kind: inSpawnProgress, Phase: transport.SpawnProvisioning},
		{Kind: inSpawnProgress, Phase: transport.SpawnDegraded}, {Kind: inSpawnProgress, Phase: transport.SpawnStarting},
		{Kind: inSpawned}, {Kind: inSpawnError, Code: "x"}, {Kind: inSpawnCancel}, {Kind: inSpawnLost},
		{Kind: inListedSpawn, Recorded: true, Running: true}, {Kind: inListedSpawn, Own: true, Running: true},
	}
	tasks := append([]TaskState{""}, TaskTable.States()...)
	for _, is := range InstanceTable.States() {
		for _, ts := range tasks {
			for flags := range 512 {
				v := coreView{Instance: is, Task: ts, Connected: flags&1 != 0, Pifleet: flags&2 != 0,
					FeedbackPending: flags&4 != 0, RunStarted: flags&8 != 0, RunInFlight: flags&16 != 0, MaxRejects: 1,
					Spawning: flags&32 != 0, SpawnCancel: flags&64 != 0, Intent: flags&128 != 0, SpawnSent: flags&256 != 0}
				if ts != "" {
					v.TaskID = "t"
				}
				for _, in := range inputs {
					plan, ok := decide(v, in)
					if !ok {
						continue
					}
					cur := v
					for _, e := range plan {
						switch e.Kind {
						case fxInstance:
							next, ok := InstanceTable.Next(cur.Instance, e.Event)
							if !ok {
								t.Fatalf("%+v, %+v: instance %s refuses %s", v, in, cur.Instance, e.Event)
							}
							cur.Instance = next
						case fxTask:
							next, ok := TaskTable.Next(cur.Task, e.TaskEvent)
							if !ok {
								t.Fatalf("%+v, %+v: task %s refuses %s", v, in, cur.Task, e.TaskEvent)
							}
							cur.Task = next
						}
					}
				}
			}
		}
	}
}

// TestCoreTranscriptsFireEverySpawnEdge: every edge of the instance table
// out of a spawn state (requested, spawning, provisioning,
// degraded_cache) is fired by a plan of the spawn transcripts.
func TestCoreTranscriptsFireEverySpawnEdge(t *testing.T) {
	files, err := filepath.Glob("testdata/core/spawn*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no spawn transcripts: %v", err)
	}
	type edge struct {
		from InstanceState
		ev   InstanceEvent
	}
	seen := map[edge]bool{}
	for _, file := range files {
		raw, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		runTranscript(t, strings.Split(strings.TrimRight(string(raw), "\n"), "\n"), func(from InstanceState, ev InstanceEvent) {
			seen[edge{from, ev}] = true
		})
	}
	for _, s := range InstanceTable.States() {
		if !isSpawnState(s) {
			continue
		}
		for _, ev := range InstanceTable.Events() {
			if _, ok := InstanceTable.Next(s, ev); ok && !seen[edge{s, ev}] {
				t.Errorf("no spawn transcript fires %s from %s", ev, s)
			}
		}
	}
}
