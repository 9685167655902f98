package serverstore

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// The crash test's child is this test binary, re-executed with childEnv
// set. It is a miniature server: it replays pending notifications, then
// ingests a stream of task_done reports exactly as the SDK must (record,
// notify, mark), printing one line after each step:
//
//	recorded <key>   RecordTaskDone committed a new report
//	dup <key>        RecordTaskDone found a duplicate
//	notified <key>   the application's callback returned
//	marked <key>     MarkNotified committed
//	done             the stream is consumed
//
// In lockstep mode it waits for one byte on stdin after each line, so
// that the parent can kill it exactly between two steps.
const (
	childEnv      = "SERVERSTORE_CRASH_CHILD"
	childDirEnv   = "SERVERSTORE_CRASH_DIR"
	childLockstep = "SERVERSTORE_CRASH_LOCKSTEP"
	streamFile    = "stream.jsonl"
)

func runChild() int {
	dir := os.Getenv(childDirEnv)
	lockstep := os.Getenv(childLockstep) == "1"
	in := bufio.NewReader(os.Stdin)
	say := func(format string, args ...any) {
		fmt.Fprintf(os.Stdout, format+"\n", args...) // os.Stdout is unbuffered
		if lockstep {
			if _, err := in.ReadByte(); err != nil {
				os.Exit(3) // the parent went away
			}
		}
	}
	fail := func(err error) int {
		fmt.Fprintf(os.Stdout, "error %v\n", err)
		return 2
	}

	st, err := Open(dir)
	if err != nil {
		return fail(err)
	}
	defer st.Close()
	notify := func(key DedupeKey) error {
		say("notified %s", key) // the application's callback
		if err := st.MarkNotified(key); err != nil {
			return err
		}
		say("marked %s", key)
		return nil
	}

	pending, err := st.PendingNotifications()
	if err != nil {
		return fail(err)
	}
	for _, d := range pending {
		if err := notify(d.Key); err != nil {
			return fail(err)
		}
	}

	raw, err := os.ReadFile(filepath.Join(dir, streamFile))
	if err != nil {
		return fail(err)
	}
	for line := range strings.Lines(string(raw)) {
		var td TaskDone
		if err := json.Unmarshal([]byte(line), &td); err != nil {
			return fail(err)
		}
		rc, err := st.RecordTaskDone(td, nil)
		if err != nil {
			return fail(err)
		}
		if rc.Duplicate {
			say("dup %s", rc.Key)
			continue
		}
		say("recorded %s", rc.Key)
		if err := notify(rc.Key); err != nil {
			return fail(err)
		}
	}
	say("done")
	return 0
}

// TestTaskDoneNotifiedExactlyOnceAcrossKill9 ingests a stream of task_done
// reports (with agent replays) in child processes killed with SIGKILL at
// seeded points, and checks the delivery guarantee: every report is
// notified at least once; a report whose MarkNotified committed is never
// notified again, neither in the same run nor after a restart; a report
// recorded but not yet marked is notified again after the restart. Set
// SERVERSTORE_CRASH_SEED to replay a run.
func TestTaskDoneNotifiedExactlyOnceAcrossKill9(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("kill -9 semantics and file locks are Unix features")
	}
	seed := uint64(20260715)
	if s := os.Getenv("SERVERSTORE_CRASH_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))

	dir := t.TempDir()
	keys := writeStream(t, dir, rng)

	everNotified := map[string]int{}
	killedAfter := map[string]int{}
	const iterations = 20
	for it := range iterations {
		// Kill precisely between two steps (lockstep), cycling through the
		// windows that matter, or let the child run free and kill it
		// wherever it is (inside a commit, say).
		var kill killPlan
		switch it % 4 {
		case 0:
			kill = killPlan{lockstep: true, afterKind: "recorded", nth: 1 + rng.IntN(3)}
		case 1:
			kill = killPlan{lockstep: true, afterKind: "notified", nth: 1 + rng.IntN(3)}
		case 2:
			kill = killPlan{lockstep: true, afterKind: "marked", nth: 1 + rng.IntN(3)}
		default:
			kill = killPlan{afterLines: 1 + rng.IntN(12)}
		}
		before := notifiedInStore(t, dir, keys)
		run := runChild1(t, dir, kill)
		killedAfter[run.lastKind]++
		checkRun(t, fmt.Sprintf("iteration %d (%+v)", it, kill), run, before)
		for _, k := range run.notified {
			everNotified[k]++
		}
		// A report left recorded-but-unmarked by a precise kill must be
		// notified by the next run's replay.
		if kill.lockstep && run.killed && (run.lastKind == "recorded" || run.lastKind == "notified") {
			beforeNext := notifiedInStore(t, dir, keys)
			next := runChild1(t, dir, killPlan{lockstep: true, afterKind: "notified", nth: 1})
			if len(next.notified) == 0 || next.notified[0] != run.lastKey {
				t.Errorf("iteration %d: killed after %s %s; the restart notified %v first, want that key replayed",
					it, run.lastKind, run.lastKey, next.notified)
			}
			checkRun(t, fmt.Sprintf("iteration %d replay", it), next, beforeNext)
			for _, k := range next.notified {
				everNotified[k]++
			}
		}
	}
	t.Logf("kills after: %v", killedAfter)

	beforeFinal := notifiedInStore(t, dir, keys)
	final := runChild1(t, dir, killPlan{})
	if !final.done {
		t.Fatalf("the final run did not finish: %+v", final)
	}
	checkRun(t, "final run", final, beforeFinal)
	for _, k := range final.notified {
		everNotified[k]++
	}
	for _, k := range keys {
		if everNotified[k.String()] == 0 {
			t.Errorf("report %s was never notified", k)
		}
	}
	st := openT(t, dir)
	pending, notified, err := st.DeliveryCounts()
	if err != nil || pending != 0 || notified != len(keys) {
		t.Errorf("after the final run: %d pending, %d notified keys (%v); want 0 and %d", pending, notified, err, len(keys))
	}
	for k, n := range everNotified {
		if n > 1 {
			t.Logf("report %s notified %d times (a kill between notify and mark)", k, n)
		}
	}
	if killedAfter["recorded"] == 0 || killedAfter["notified"] == 0 {
		t.Errorf("no kill landed in a window that matters: %v", killedAfter)
	}
}

// writeStream writes the task_done stream: 24 distinct reports from three
// instances, interleaved with replays of earlier ones (as an agent that
// missed acks sends). It returns the distinct keys.
func writeStream(t *testing.T, dir string, rng *rand.Rand) []DedupeKey {
	t.Helper()
	var sent []TaskDone
	var keys []DedupeKey
	var b strings.Builder
	emit := func(td TaskDone) {
		raw, err := json.Marshal(td)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(raw)
		b.WriteByte('\n')
	}
	for i := range 24 {
		td := TaskDone{
			TaskID:     fmt.Sprintf("t-%d", i/2),       // revisions reuse the task id
			InstanceID: fmt.Sprintf("i-%012x", i%3),    // three workers
			Seq:        float64(1_760_000_000_000 + i), // ms epoch, as the agent sends
			Status:     "settled",
			Summary:    fmt.Sprintf("summary %d", i),
		}
		sent = append(sent, td)
		keys = append(keys, td.Key())
		emit(td)
		if rng.IntN(3) == 0 {
			emit(sent[rng.IntN(len(sent))])
		}
	}
	if err := os.WriteFile(filepath.Join(dir, streamFile), []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return keys
}

// killPlan says when to kill a child: in lockstep, right after its nth
// line of kind afterKind; free-running, after afterLines lines; never
// when zero.
type killPlan struct {
	lockstep   bool
	afterKind  string
	nth        int
	afterLines int
}

// childRun is what one child printed.
type childRun struct {
	lines    []string
	notified []string // keys, in order
	killed   bool
	done     bool
	lastKind string // the kind of the last line read before the kill
	lastKey  string
}

func runChild1(t *testing.T, dir string, kill killPlan) childRun {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	lockstep := "0"
	if kill.lockstep {
		lockstep = "1"
	}
	cmd.Env = append(os.Environ(), childEnv+"=1", childDirEnv+"="+dir, childLockstep+"="+lockstep)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var run childRun
	seen := map[string]int{}
	sc := bufio.NewScanner(out)
	// Read to the end: a free-running child may have printed more (and
	// notified more) between the line that triggered the kill and its
	// death, and those notifications happened.
	for sc.Scan() {
		line := sc.Text()
		run.lines = append(run.lines, line)
		kind, key, _ := strings.Cut(line, " ")
		switch kind {
		case "error":
			t.Errorf("child failed: %s", line)
		case "notified":
			run.notified = append(run.notified, key)
		case "done":
			run.done = true
		}
		if run.killed {
			continue
		}
		run.lastKind, run.lastKey = kind, key
		seen[kind]++
		if (kill.lockstep && kind == kill.afterKind && seen[kind] == kill.nth) ||
			(kill.afterLines > 0 && len(run.lines) == kill.afterLines) {
			if err := cmd.Process.Kill(); err != nil { // SIGKILL
				t.Fatal(err)
			}
			run.killed = true
			continue
		}
		if kill.lockstep {
			if _, err := stdin.Write([]byte{'\n'}); err != nil {
				t.Fatal(err)
			}
		}
	}
	stdin.Close()
	err = cmd.Wait()
	if !run.killed && err != nil {
		t.Fatalf("child: %v (output %q)", err, run.lines)
	}
	return run
}

// checkRun checks one child's output against the store's state before
// the run: no key notified before the run (MarkNotified committed) is
// notified again; within the run, a key is notified at most once, and
// never after it was marked.
func checkRun(t *testing.T, when string, run childRun, notifiedBefore map[string]bool) {
	t.Helper()
	notifiedNow := map[string]bool{}
	marked := map[string]bool{}
	for _, line := range run.lines {
		kind, key, _ := strings.Cut(line, " ")
		switch kind {
		case "notified":
			if notifiedBefore[key] {
				t.Errorf("%s: %s was notified again after a restart although MarkNotified had committed", when, key)
			}
			if marked[key] || notifiedNow[key] {
				t.Errorf("%s: %s notified twice in one run", when, key)
			}
			notifiedNow[key] = true
		case "marked":
			marked[key] = true
		case "recorded":
			if notifiedBefore[key] {
				t.Errorf("%s: %s recorded as new although it was already notified", when, key)
			}
		}
	}
}

// notifiedInStore returns the keys whose MarkNotified has committed.
func notifiedInStore(t *testing.T, dir string, keys []DedupeKey) map[string]bool {
	t.Helper()
	st, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	out := map[string]bool{}
	for _, k := range keys {
		d, ok, err := st.Delivery(k)
		if err != nil {
			t.Fatal(err)
		}
		if ok && d.Notified {
			out[k.String()] = true
		}
	}
	return out
}
