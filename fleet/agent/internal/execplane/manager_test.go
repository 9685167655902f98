package execplane

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"example.com/pifleet/transport"
)

// Checklist 93: argv arguments arrive verbatim and the streams are kept
// apart.
func TestArgvVerbatimAndStreams(t *testing.T) {
	m, _ := newManager(t, nil)
	r, _ := run(t, m, Request{Mode: transport.ExecArgv, Cwd: t.TempDir(), Executable: "/bin/sh",
		Args: []string{"-c", `printf '%s|%s' "$1" "$2"; printf oops >&2`, "sh", "a b", "$HOME"}})
	if got := r.stream(transport.Stdout); got != "a b|$HOME" {
		t.Errorf("stdout %q", got)
	}
	if got := r.stream(transport.Stderr); got != "oops" {
		t.Errorf("stderr %q", got)
	}
	if r.exit.ExitCode == nil || *r.exit.ExitCode != 0 || r.exit.Signal != nil || r.exit.Aborted || r.exit.TimedOut {
		t.Errorf("exit %+v", r.exit)
	}
}

// Checklist 95: big output comes in chunks of at most 48 KiB, with one seq
// counter from 0 and nothing lost or reordered; the exit comes last.
func TestChunksAndSeq(t *testing.T) {
	m, _ := newManager(t, nil)
	r, _ := run(t, m, Request{Mode: transport.ExecShell, Cwd: t.TempDir(),
		Command: `head -c 150000 /dev/zero | tr '\0' a; echo; for i in 1 2 3; do echo e$i >&2; echo o$i; done`})
	for i, o := range r.outputs {
		if o.Seq != float64(i) {
			t.Fatalf("output %d has seq %v", i, o.Seq)
		}
		if n := len(o.Base64) / 4 * 3; n > ChunkBytes {
			t.Fatalf("chunk %d is %d bytes", i, n)
		}
	}
	want := strings.Repeat("a", 150000) + "\no1\no2\no3\n"
	if got := r.stream(transport.Stdout); got != want {
		t.Errorf("stdout: %d bytes, want %d", len(got), len(want))
	}
	if got := r.stream(transport.Stderr); got != "e1\ne2\ne3\n" {
		t.Errorf("stderr %q", got)
	}
	if len(r.outputs) < 4 {
		t.Errorf("%d chunks for 150,000 bytes", len(r.outputs))
	}
}

// Checklist 97: shell mode, exit code 7.
func TestShellExitCode(t *testing.T) {
	m, _ := newManager(t, nil)
	r, _ := run(t, m, Request{Mode: transport.ExecShell, Cwd: t.TempDir(), Command: "echo hi; exit 7"})
	if r.stream(transport.Stdout) != "hi\n" || r.exit.ExitCode == nil || *r.exit.ExitCode != 7 {
		t.Errorf("stdout %q exit %+v", r.stream(transport.Stdout), r.exit)
	}
}

// Checklist 96: a missing executable is a started execution that reports
// the error on stderr and exitCode null; it is listed as exited.
func TestMissingExecutable(t *testing.T) {
	m, _ := newManager(t, nil)
	r, e := run(t, m, Request{Mode: transport.ExecArgv, Cwd: t.TempDir(), Executable: "/nonexistent/tool"})
	if r.exit.ExitCode != nil || r.exit.Signal != nil {
		t.Errorf("exit %+v", r.exit)
	}
	if !strings.Contains(r.stream(transport.Stderr), "/nonexistent/tool") {
		t.Errorf("stderr %q", r.stream(transport.Stderr))
	}
	<-e.Done()
	l := m.List()
	if len(l) != 1 || l[0].ExecID != e.ID() || l[0].State != transport.ExecExited || l[0].ExitCode != nil {
		t.Errorf("list %+v", l)
	}
}

// Checklists 98, 99 and the other start checks, in the reference's order.
func TestStartRefusals(t *testing.T) {
	root := t.TempDir()
	inside := root + "/sub"
	if err := os.Mkdir(inside, 0o700); err != nil {
		t.Fatal(err)
	}
	m, _ := newManager(t, func(c *Config) { c.Roots = []string{root, "/no/such/root"}; c.MaxConcurrent = 1 })
	cases := []struct {
		name string
		req  Request
		code string
	}{
		{"outside roots", Request{Mode: transport.ExecShell, Cwd: t.TempDir(), Command: "true"}, CodeOutsideRoots},
		{"missing cwd", Request{Mode: transport.ExecShell, Cwd: root + "/nope", Command: "true"}, CodeBadCwd},
		{"relative cwd", Request{Mode: transport.ExecShell, Cwd: ".", Command: "true"}, CodeBadCwd},
		{"no command", Request{Mode: transport.ExecShell, Cwd: root}, CodeBadRequest},
		{"no executable", Request{Mode: transport.ExecArgv, Cwd: root}, CodeBadRequest},
		{"zero timeout", Request{Mode: transport.ExecShell, Cwd: root, Command: "true", TimeoutSeconds: seconds(0)}, CodeBadRequest},
		{"outside instance", Request{Mode: transport.ExecShell, Cwd: root, Command: "true", InstanceRoot: inside}, CodeOutsideRoots},
	}
	for _, tc := range cases {
		_, err := m.Start(tc.req, func(transport.Frame) {})
		var se *StartError
		if !errors.As(err, &se) || se.Code != tc.code {
			t.Errorf("%s: %v, want code %s", tc.name, err, tc.code)
		}
	}
	if _, err := m.Start(Request{Mode: transport.ExecShell, Cwd: t.TempDir(), Command: "true"}, nil); err == nil ||
		err.Error() != "cwd is outside configured exec roots" {
		t.Errorf("roots message: %v", err)
	}
	// The cap: one running, the second refused.
	c := newCollector()
	e, err := m.Start(Request{Mode: transport.ExecShell, Cwd: inside, Command: "sleep 300"}, c.send)
	if err != nil {
		t.Fatal(err)
	}
	e.Run()
	_, err = m.Start(Request{Mode: transport.ExecShell, Cwd: inside, Command: "true"}, nil)
	var se *StartError
	if !errors.As(err, &se) || se.Code != CodeCapacity || err.Error() != "execution capacity reached: 1/1" {
		t.Errorf("cap: %v", err)
	}
	if err := m.Abort(e.ID()); err != nil {
		t.Fatal(err)
	}
	c.wait(t)
	<-e.Done()
	if _, err := m.Start(Request{Mode: transport.ExecShell, Cwd: inside, Command: "true"}, func(transport.Frame) {}); err != nil {
		t.Errorf("slot not freed: %v", err)
	}
}

// Checklist 100: the timeout kills a long command: timedOut, SIGTERM.
func TestTimeout(t *testing.T) {
	m, _ := newManager(t, func(c *Config) { c.DefaultTimeout = 100 * time.Millisecond })
	r, _ := run(t, m, Request{Mode: transport.ExecShell, Cwd: t.TempDir(), Command: "exec sleep 300"})
	if !r.exit.TimedOut || r.exit.Aborted || r.exit.Signal == nil || *r.exit.Signal != "SIGTERM" || r.exit.ExitCode != nil {
		t.Errorf("exit %+v", r.exit)
	}
	// The request's timeout wins over the default, capped by MaxTimeout.
	m2, _ := newManager(t, func(c *Config) { c.MaxTimeout = 100 * time.Millisecond })
	r, _ = run(t, m2, Request{Mode: transport.ExecShell, Cwd: t.TempDir(), Command: "exec sleep 300", TimeoutSeconds: seconds(3000)})
	if !r.exit.TimedOut {
		t.Errorf("max timeout not applied: %+v", r.exit)
	}
}

// Checklist 101 and the process group: an abort ends the command and
// everything it started, and one that ignores SIGTERM gets SIGKILL.
func TestAbortKillsProcessGroup(t *testing.T) {
	m, _ := newManager(t, nil)
	c := newCollector()
	e, err := m.Start(Request{Mode: transport.ExecShell, Cwd: t.TempDir(),
		Command: `trap '' TERM; sleep 300 & echo $!; wait`}, c.send)
	if err != nil {
		t.Fatal(err)
	}
	e.Run()
	first := (<-c.frames).(*transport.ExecOutputFrame)
	r := result{outputs: []*transport.ExecOutputFrame{first}}
	child, err := strconv.Atoi(strings.TrimSpace(r.stream(transport.Stdout)))
	if err != nil {
		t.Fatalf("child pid: %v", err)
	}
	if err := m.Abort(e.ID()); err != nil {
		t.Fatal(err)
	}
	if err := m.Abort(e.ID()); err != nil && !errors.Is(err, ErrUnknownExec) {
		t.Fatal(err)
	}
	end := c.wait(t)
	if !end.exit.Aborted || end.exit.TimedOut || end.exit.Signal == nil || *end.exit.Signal != "SIGKILL" {
		t.Errorf("exit %+v", end.exit)
	}
	if !gone(t, child) {
		t.Errorf("child %d of the aborted command still runs", child)
	}
	if err := m.Abort(e.ID()); !errors.Is(err, ErrUnknownExec) {
		t.Errorf("abort after exit: %v", err)
	}
}

// A command that exits leaving a background process behind does not leave
// it running.
func TestNoProcessOutlivesItsExecution(t *testing.T) {
	m, _ := newManager(t, nil)
	r, _ := run(t, m, Request{Mode: transport.ExecShell, Cwd: t.TempDir(), Command: `sleep 300 & echo $!`})
	child, err := strconv.Atoi(strings.TrimSpace(r.stream(transport.Stdout)))
	if err != nil {
		t.Fatalf("child pid: %v", err)
	}
	if r.exit.ExitCode == nil || *r.exit.ExitCode != 0 {
		t.Errorf("exit %+v", r.exit)
	}
	if !gone(t, child) {
		t.Errorf("background child %d survived", child)
	}
}

// AbortOwner aborts only the owner's executions (the agent calls it when
// the owner's connection closes).
func TestAbortOwner(t *testing.T) {
	m, _ := newManager(t, nil)
	mine, other := newCollector(), newCollector()
	a, err := m.Start(Request{Mode: transport.ExecShell, Cwd: t.TempDir(), Command: "exec sleep 300", Owner: "a"}, mine.send)
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Start(Request{Mode: transport.ExecShell, Cwd: t.TempDir(), Command: "exec sleep 300", Owner: "b"}, other.send)
	if err != nil {
		t.Fatal(err)
	}
	a.Run()
	b.Run()
	if n := m.AbortOwner("a"); n != 1 {
		t.Fatalf("aborted %d", n)
	}
	if r := mine.wait(t); !r.exit.Aborted {
		t.Errorf("exit %+v", r.exit)
	}
	<-a.Done()
	l := m.List()
	if len(l) != 2 || l[0].ExecID != b.ID() || l[0].State != transport.ExecRunning || l[1].ExecID != a.ID() || !l[1].Aborted {
		t.Errorf("list %+v", l)
	}
}

// Checklist 94: the audit log has a start and an exit record per
// execution, no output, and only its owner may read it.
func TestAuditLog(t *testing.T) {
	m, path := newManager(t, nil)
	_, e := run(t, m, Request{Mode: transport.ExecArgv, Cwd: t.TempDir(), Executable: "/bin/echo", Args: []string{"secret-output"}, Owner: "srv"})
	<-e.Done()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("audit log mode %v", st.Mode().Perm())
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var events []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.Contains(sc.Text(), "secret-output\n") || strings.Contains(sc.Text(), "stdout") {
			t.Errorf("output in the audit log: %s", sc.Text())
		}
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatal(err)
		}
		if rec["execId"] != e.ID() || rec["owner"] != "srv" || rec["executable"] != "/bin/echo" {
			t.Errorf("record %v", rec)
		}
		if _, err := time.Parse(time.RFC3339, rec["at"].(string)); err != nil {
			t.Errorf("at: %v", err)
		}
		events = append(events, rec["event"].(string))
	}
	if strings.Join(events, ",") != "start,exit" {
		t.Errorf("events %v", events)
	}
	// A log that exists with a wider mode is narrowed on open.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	m.Close()
	m2, err := New(Config{AuditFile: path})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("reopened audit log mode %v", st.Mode().Perm())
	}
}

// Close aborts what runs and refuses new starts.
func TestCloseAbortsAll(t *testing.T) {
	m, _ := newManager(t, nil)
	c := newCollector()
	e, err := m.Start(Request{Mode: transport.ExecShell, Cwd: t.TempDir(), Command: "exec sleep 300"}, c.send)
	if err != nil {
		t.Fatal(err)
	}
	e.Run()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if r := c.wait(t); !r.exit.Aborted {
		t.Errorf("exit %+v", r.exit)
	}
	var se *StartError
	if _, err := m.Start(Request{Mode: transport.ExecShell, Cwd: t.TempDir(), Command: "true"}, nil); !errors.As(err, &se) || se.Code != CodeClosed {
		t.Errorf("start after close: %v", err)
	}
}
