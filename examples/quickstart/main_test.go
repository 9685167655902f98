package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"example.com/pifleet/internal/pitest"

	"example.com/pifleet/internal/fsmkit/fsmtest"
)

// TestMain lets the test binary play the roles the quickstart re-executes
// itself for (the shim and the scripted worker), since os.Executable is
// the test binary here, and fails the package when a test leaves a
// goroutine behind. The signal package's loop lives as long as the process.
func TestMain(m *testing.M) {
	if code, ok := reexec(os.Args[1:]); ok {
		os.Exit(code)
	}
	if os.Getenv("GORACE") == "" {
		// Shims and workers are this binary under -race: let them exit at
		// once instead of sleeping a second.
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	trace := fsmtest.StartTrace(fsmtest.Checks{}) // no event dropped silently
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("os/signal.signal_recv"), goleak.IgnoreAnyFunction("os/signal.loop"),
		goleak.Cleanup(func(code int) { os.Exit(trace.Check(code)) }))
}

// testTimeout bounds each wait of the quickstart, so that a broken fleet
// fails the test with the quickstart's own message instead of hanging.
const testTimeout = "60s"

// wantStates is the instance machine's walk through the quickstart: spawn,
// a task, one rejection, the accepted revision, stop.
var wantStates = []string{
	"requested", "spawning", "provisioning", "idle",
	"running", "awaiting_review", "verifying", "revising",
	"running", "awaiting_review", "verifying", "accepted",
	"stopping", "stopped",
}

var transition = regexp.MustCompile(`^instance:\s+\S+ (\S+) → (\S+) \(`)

// instanceStates returns the states of the transcript's instance lines.
func instanceStates(transcript string) []string {
	var states []string
	for _, line := range strings.Split(transcript, "\n") {
		if m := transition.FindStringSubmatch(line); m != nil {
			if len(states) == 0 {
				states = append(states, m[1])
			} else if states[len(states)-1] != m[1] {
				states = append(states, "(jump to "+m[1]+")")
			}
			states = append(states, m[2])
		}
	}
	return states
}

// quickstart runs the quickstart in this process with a temporary
// directory under a fresh parent, and returns its exit status, transcript,
// stderr and that parent.
func quickstart(t *testing.T, args ...string) (code int, stdout, stderr, parent string) {
	t.Helper()
	parent = t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	code = realMain(ctx, append([]string{"--tmp", parent, "--timeout", testTimeout}, args...), &out, &errOut)
	return code, out.String(), errOut.String(), parent
}

// checkTranscript asserts what the quickstart promises: exit status 0, the
// static identity warning, the instance's states in order, both answers of
// the worker in order around the rejection, a revised file, "ok" last,
// and nothing left on disk.
func checkTranscript(t *testing.T, code int, out, errOut, parent string) {
	t.Helper()
	if code != 0 {
		t.Fatalf("exit status %d\nstderr:\n%s\ntranscript:\n%s", code, errOut, out)
	}
	if got := instanceStates(out); !slices.Equal(got, wantStates) {
		t.Errorf("instance states:\n got %v\nwant %v\ntranscript:\n%s", got, wantStates, out)
	}
	if !strings.Contains(out, "STATIC IDENTITY MAP IN FORCE: 127.0.0.1=quickstart") {
		t.Errorf("the transcript does not say that a static identity map is in force:\n%s", out)
	}
	// The worker's two answers, the first before the rejection and the
	// second after it, and the file the reviewer read each time.
	var order []int
	for _, want := range []string{
		`worker:    says "I wrote a first draft of notes.txt."`,
		`review:    notes.txt reads "pifleet quickstart: first draft"`,
		`review:    reject with feedback:`,
		`worker:    says "revised: notes.txt now holds the reviewer's wording."`,
		`review:    notes.txt reads "pifleet quickstart: revised draft, as the reviewer asked"`,
		`review:    accept (disposition stop)`,
	} {
		i := strings.Index(out, want)
		if i < 0 {
			t.Errorf("the transcript lacks %q:\n%s", want, out)
			continue
		}
		order = append(order, i)
	}
	if !slices.IsSorted(order) {
		t.Errorf("the transcript's steps are out of order:\n%s", out)
	}
	if n := strings.Count(out, " done (settled)"); n != 2 {
		t.Errorf("%d task_done reports in the transcript, want 2:\n%s", n, out)
	}
	if !strings.HasSuffix(out, "quickstart: ok\n") {
		t.Errorf("the transcript does not end with ok:\n%s", out)
	}
	entries, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("the temporary directory is left behind: %v", entries)
	}
}

func TestQuickstartScripted(t *testing.T) {
	code, out, errOut, parent := quickstart(t)
	checkTranscript(t, code, out, errOut, parent)
	if !strings.Contains(out, "the scripted pi-compatible worker") {
		t.Errorf("the transcript does not name the worker:\n%s", out)
	}
}

func TestQuickstartRealPi(t *testing.T) {
	pi := pitest.Find(t) // skips with a clear message when PIFLEET_PI is unset
	code, out, errOut, parent := quickstart(t, "--pi", pi)
	checkTranscript(t, code, out, errOut, parent)
	if !strings.Contains(out, "the real pi at "+pi) {
		t.Errorf("the transcript does not name the real pi:\n%s", out)
	}
}

func TestKeepKeepsTheDirectory(t *testing.T) {
	code, out, errOut, parent := quickstart(t, "--keep")
	if code != 0 {
		t.Fatalf("exit status %d\n%s\n%s", code, errOut, out)
	}
	entries, err := os.ReadDir(parent)
	if err != nil || len(entries) != 1 || !strings.HasPrefix(entries[0].Name(), "pifleet-quickstart-") {
		t.Fatalf("--keep: %v %v", entries, err)
	}
	kept := parent + "/" + entries[0].Name()
	if !strings.Contains(out, "quickstart: kept "+kept) {
		t.Errorf("the transcript does not say where it kept its files:\n%s", out)
	}
	// The workspace holds the accepted revision.
	notes, err := os.ReadFile(kept + "/work/notes.txt")
	if err != nil || string(notes) != "pifleet quickstart: revised draft, as the reviewer asked" {
		t.Errorf("kept notes.txt: %q %v", notes, err)
	}
}

// A worker that cannot start: exit status 1 with the agent's reason, and
// nothing left on disk or running.
func TestFailureExitsOne(t *testing.T) {
	code, out, errOut, parent := quickstart(t, "--pi", "/bin/false")
	if code != 1 || !strings.Contains(errOut, "quickstart: FAILED: spawn:") {
		t.Fatalf("exit status %d, stderr %q\n%s", code, errOut, out)
	}
	if strings.Contains(out, "quickstart: ok") {
		t.Errorf("a failed run says ok:\n%s", out)
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 0 {
		t.Errorf("the temporary directory is left behind: %v", entries)
	}
}

func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--help"}, 0, "usage: quickstart"},
		{[]string{"extra"}, 2, `unexpected argument "extra"`},
		{[]string{"--timeout", "0s"}, 2, "--timeout must be positive"},
		{[]string{"--pi", "/nonexistent/pi"}, 2, "--pi: stat /nonexistent/pi"},
		{[]string{"--no-such-flag"}, 2, "flag provided but not defined"},
	} {
		var out, errOut bytes.Buffer
		code := realMain(context.Background(), tc.args, &out, &errOut)
		if code != tc.code || !strings.Contains(errOut.String(), tc.want) || out.Len() != 0 {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want exit %d and %q", tc.args, code, errOut.String(), out.String(), tc.code, tc.want)
		}
	}
}
