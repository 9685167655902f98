package agentstore

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Environment of the crash child: the state directory, its seed and how
// far its clock is behind the real one.
const (
	crashDirEnv  = "AGENTSTORE_CRASH_DIR"
	crashSeedEnv = "AGENTSTORE_CRASH_SEED"
	crashSkewEnv = "AGENTSTORE_CRASH_SKEW"
)

// TestCrashChild is not a test: it is the process TestCrashKill9 starts
// (the test binary re-executed) and kills. It puts task_done entries and
// acks some of them, printing a line after each step completes:
//
//	put <seq>      Put returned: the entry is committed
//	acking <seq>   about to Ack (the ack may or may not land)
//	ack <seq>      Ack returned: the entry is gone
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("helper process of TestCrashKill9")
	}
	seed, _ := strconv.ParseUint(os.Getenv(crashSeedEnv), 10, 64)
	skew, _ := time.ParseDuration(os.Getenv(crashSkewEnv))
	s, err := Open(dir, WithClock(func() time.Time { return time.Now().Add(-skew) }))
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	for i := range 10_000 { // bounded: the parent kills long before
		task := fmt.Sprintf("t%d-%d", seed, i)
		e, err := s.Put(done("i1", task), "")
		if err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		fmt.Println("put", uint64(e.Seq))
		if rng.IntN(2) == 0 {
			fmt.Println("acking", uint64(e.Seq))
			if ok, err := s.Ack(task, e.Seq.Float()); !ok || err != nil {
				fmt.Println("error ack", ok, err)
				os.Exit(2)
			}
			fmt.Println("ack", uint64(e.Seq))
		}
	}
	fmt.Println("done")
	os.Exit(0)
}

// TestCrashKill9 kills a process writing the outbox with SIGKILL at random
// (seeded) points, 20 times, reopening the file after each kill (the
// child's own loop is bounded, so a run that is not killed ends by itself):
//
//   - every put the child reported, and did not start to ack, is present;
//   - nothing whose ack the child reported is present;
//   - an entry the child was acking when it died may be either;
//   - the only entries nobody reported are the one Put the child was in
//     when it died (committed, not yet printed): at most one per run,
//     above every reported seq;
//   - seqs strictly increase across restarts, although every other run's
//     clock is hours behind the previous one.
//
// The parent only ever waits for the child's lines, never sleeps.
func TestCrashKill9(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(20260101, 9))
	mustBe := map[Seq]bool{} // present after every later reopen
	gone := map[Seq]bool{}   // absent after every later reopen
	var high Seq             // the highest seq the file has ever held
	kills := 0
	var inFlightPuts, acksLanded, acksLost int // where the kills landed
	for run := range 20 {
		killAfter := 1 + rng.IntN(60)
		skew := time.Duration(run%2) * 3 * time.Hour
		cmd := exec.Command(exe, "-test.run=^TestCrashChild$", "-test.count=1")
		cmd.Env = append(os.Environ(),
			crashDirEnv+"="+dir,
			crashSeedEnv+"="+strconv.Itoa(run),
			crashSkewEnv+"="+skew.String())
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}

		// Odd runs kill as soon as line killAfter arrives, which lands at
		// the start of the child's next step; even runs arm a timer of a
		// random fraction of a millisecond instead, so that the kill lands
		// anywhere inside a step, commits included. Either way the parent
		// itself only ever waits for the child's lines.
		killed := false
		kill := func() {
			if killed {
				return
			}
			killed = true
			kills++
			if run%2 == 1 {
				cmd.Process.Signal(syscall.SIGKILL)
				return
			}
			time.AfterFunc(time.Duration(rng.IntN(3000))*time.Microsecond, func() { cmd.Process.Signal(syscall.SIGKILL) })
		}
		printed := map[Seq]string{} // seq → last step printed
		var runHigh Seq
		lines := 0
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 0 {
				continue
			}
			if f[0] == "error" {
				t.Fatalf("run %d: child: %s", run, sc.Text())
			}
			if len(f) != 2 || (f[0] != "put" && f[0] != "acking" && f[0] != "ack") {
				continue // the test framework's own output
			}
			n, err := strconv.ParseUint(f[1], 10, 64)
			if err != nil {
				t.Fatalf("run %d: bad line %q", run, sc.Text())
			}
			q := Seq(n)
			if f[0] == "put" {
				if q <= high || q <= runHigh {
					t.Fatalf("run %d: seq %d reused or decreasing (highest before: %d, this run: %d)", run, q, high, runHigh)
				}
				runHigh = q
			}
			printed[q] = f[0]
			// Kill once, then keep reading: lines the child wrote before
			// it died are still in the pipe, and they are facts too.
			if lines++; lines == killAfter {
				kill()
			}
		}
		err = cmd.Wait()
		var exitErr *exec.ExitError
		if err != nil && !(errors.As(err, &exitErr) && exitErr.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL) {
			t.Fatalf("run %d: child: %v\n%s", run, err, stderr.String())
		}

		s, err := Open(dir)
		if err != nil {
			t.Fatalf("run %d: reopen after kill: %v", run, err)
		}
		present := map[Seq]bool{}
		for _, e := range pending(t, s) {
			present[e.Seq] = true
		}
		for q, step := range printed {
			switch {
			case step == "put" && !present[q]:
				t.Errorf("run %d: seq %d was put (and not acked) but is lost", run, q)
			case step == "ack" && present[q]:
				t.Errorf("run %d: seq %d was acked but is still there", run, q)
			}
			if step == "acking" {
				if present[q] {
					acksLost++
				} else {
					acksLanded++
				}
			}
			if present[q] {
				mustBe[q] = true
			} else {
				gone[q] = true
			}
		}
		unreported := 0
		for q := range present {
			if _, ok := printed[q]; ok || mustBe[q] {
				continue
			}
			if q <= runHigh || q <= high {
				t.Errorf("run %d: entry %d was never reported and is not the last put", run, q)
			}
			unreported++
			inFlightPuts++
			mustBe[q] = true
		}
		if unreported > 1 {
			t.Errorf("run %d: %d unreported entries, at most the one in flight may be", run, unreported)
		}
		for q := range mustBe {
			if !present[q] {
				t.Errorf("run %d: seq %d from an earlier run is lost", run, q)
			}
		}
		for q := range gone {
			if present[q] {
				t.Errorf("run %d: seq %d came back", run, q)
			}
		}
		if last := lastSeq(t, s); last < runHigh {
			t.Errorf("run %d: stored last seq %d below reported %d", run, last, runHigh)
		} else {
			high = last
		}
		s.Close()
		if t.Failed() {
			t.FailNow()
		}
	}
	if kills < 15 {
		t.Errorf("only %d of 20 runs were killed mid-way", kills)
	}
	t.Logf("%d kills; %d entries survive, %d acked; killed during a put after commit %d times, during an ack %d times (landed %d)",
		kills, len(mustBe), len(gone), inFlightPuts, acksLanded+acksLost, acksLanded)
}
