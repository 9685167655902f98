//go:build unix

package shim

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestLinesAndWritesFlowInOrder(t *testing.T) {
	cfg := testConfig(t)
	c := startShim(t, cfg)

	st, err := c.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !st.Running || st.WorkerPID <= 0 || st.PGID <= 0 || st.PGID == st.WorkerPID || st.InstanceID != cfg.InstanceID {
		t.Fatalf("status = %+v", st)
	}

	write(t, c, "emit 1000")
	expectLines(t, c, 1, 1000, 0)
	for i := range 50 {
		write(t, c, fmt.Sprintf("echo cmd %d", i))
	}
	for i := range 50 {
		ev := next(t, c)
		if want := fmt.Sprintf("cmd %d", i); string(ev.Data) != want || ev.Seq != uint64(1001+i) {
			t.Fatalf("got seq %d %q, want seq %d %q", ev.Seq, ev.Data, 1001+i, want)
		}
	}
	if err := c.Ack(1050); err != nil {
		t.Fatal(err)
	}
	st, err = c.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st.AckedThrough != 1050 || st.NextSeq != 1051 || st.BufferedBytes != 0 {
		t.Errorf("after ack: acked %d next %d buffered %d, want 1050 1051 0", st.AckedThrough, st.NextSeq, st.BufferedBytes)
	}

	write(t, c, "stderr bye", "exit 4")
	exit := expectExit(t, c, cfg)
	if exit.Code != 4 || exit.Signal != "" || !strings.Contains(exit.StderrTail, "bye") {
		t.Errorf("exit = %+v", exit)
	}
	<-c.ShimExited()
}

func TestSplitsLinesLikePi(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxLine = 1024
	c := startShim(t, cfg)
	write(t, c,
		`print "crlf\r\nplain\n"`,
		`print "{\"s\":\"a\u2028b\u2029c\"}\n"`,
		`print "\n"`,
		"big 5000",
		"big 1024",
		`print "cut at exit"`,
		"exit 0",
	)
	want := []Event{
		{Kind: EventLine, Seq: 1, Data: []byte("crlf")},
		{Kind: EventLine, Seq: 2, Data: []byte("plain")},
		{Kind: EventLine, Seq: 3, Data: []byte("{\"s\":\"a\u2028b\u2029c\"}")},
		{Kind: EventLine, Seq: 4, Data: []byte{}},
		{Kind: EventLine, Seq: 5, Overlong: 5000},
		{Kind: EventLine, Seq: 6, Data: []byte(strings.Repeat("a", 1024))},
		{Kind: EventLine, Seq: 7, Data: []byte("cut at exit")},
	}
	for _, w := range want {
		ev := next(t, c)
		if ev.Kind != w.Kind || ev.Seq != w.Seq || string(ev.Data) != string(w.Data) || ev.Overlong != w.Overlong {
			t.Errorf("got %v seq %d %.40q overlong %d, want %v seq %d %.40q overlong %d",
				ev.Kind, ev.Seq, ev.Data, ev.Overlong, w.Kind, w.Seq, w.Data, w.Overlong)
		}
	}
	if exit := expectExit(t, c, cfg); exit.Code != 0 {
		t.Errorf("exit = %+v", exit)
	}
}

// An agent in another process is killed with SIGKILL while it holds the
// attachment; the worker keeps printing; a new agent resumes after the last
// acknowledged line with no duplicate, no gap, order kept.
func TestReattachAfterAgentKilled(t *testing.T) {
	w := newWitness(t)
	trigger, fire := newTrigger(t)
	cfg := testConfig(t, w.env(), "TRIGGER="+trigger)
	first := startShim(t, cfg)
	first.Close() // the holder process is the agent from now on

	holder := exec.Command(os.Args[0], "holder", cfg.Socket, cfg.InstanceID, cfg.Token,
		"200", "150", "emit 200", "await", "emit 300", "note emitted")
	out, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := holder.StdinPipe() // never written: the holder waits on it
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "acked 150\n" {
		holder.Process.Kill()
		holder.Wait()
		t.Fatalf("holder said %q, %v", line, err)
	}
	holder.Process.Kill()
	holder.Wait()

	// Nobody is attached: the worker prints 300 more lines.
	fire()
	w.expect(t, "emitted")

	c := attach(t, cfg, 0)
	if got := c.Attached().AckedThrough; got != 150 {
		t.Fatalf("attached with AckedThrough %d, want 150", got)
	}
	expectLines(t, c, 151, 200, 0)
	expectLines(t, c, 1, 300, 200)
	write(t, c, "exit 0")
	expectExit(t, c, cfg)
}

// A client closed abruptly (no goodbye of any kind) is the same to the shim
// as a dead agent; re-attaching with an explicit ResumeFrom acknowledges
// everything before it.
func TestResumeFrom(t *testing.T) {
	w := newWitness(t)
	cfg := testConfig(t, w.env())
	c := startShim(t, cfg)
	write(t, c, "emit 100", "note emitted")
	w.expect(t, "emitted")
	expectLines(t, c, 1, 10, 0)
	c.conn.Close() // abrupt

	c2 := attach(t, cfg, 40)
	if got := c2.Attached().AckedThrough; got != 39 {
		t.Errorf("ResumeFrom 40 left AckedThrough at %d, want 39", got)
	}
	expectLines(t, c2, 40, 100, 0)
	if err := c2.Detach(t.Context()); err != nil {
		t.Fatal(err)
	}

	// Acknowledged lines are skipped, not reported lost.
	c3 := attach(t, cfg, 20)
	write(t, c3, "echo after")
	if ev := next(t, c3); ev.Kind != EventLine || ev.Seq != 101 || string(ev.Data) != "after" {
		t.Errorf("got %v seq %d %q, want line 101 \"after\"", ev.Kind, ev.Seq, ev.Data)
	}
	c3.Close()

	_, err := Attach(t.Context(), AttachConfig{Socket: cfg.Socket, InstanceID: cfg.InstanceID, Token: cfg.Token, ResumeFrom: 500})
	var re *RemoteError
	if !errors.As(err, &re) || re.Code != CodeBadResume || !errors.Is(err, ErrProtocol) {
		t.Errorf("ResumeFrom beyond the end: %v, want a bad_resume RemoteError", err)
	}
}

func TestOverflowWhileDetachedReportsGap(t *testing.T) {
	w := newWitness(t)
	cfg := testConfig(t, w.env())
	cfg.BufferBytes = 16 << 10
	c := startShim(t, cfg)
	write(t, c, "emit 1000 100", "note emitted")
	c.Close()
	w.expect(t, "emitted")

	// Every seq arrives exactly once, in order, as a line or inside a gap;
	// the first lines were certainly dropped while nobody was attached (the
	// worker wrote far more than the pipe and the buffer hold).
	c2 := attach(t, cfg, 0)
	var gaps, lost uint64
	for seq := uint64(1); seq <= 1000; {
		ev := next(t, c2)
		switch {
		case ev.Kind == EventGap && ev.Gap.From == seq && ev.Gap.To > seq:
			gaps++
			lost += ev.Gap.Lines()
			seq = ev.Gap.To
		case ev.Kind == EventLine && ev.Seq == seq && strings.HasPrefix(string(ev.Data), fmt.Sprintf("line %dx", seq)):
			c2.Ack(seq)
			seq++
		default:
			t.Fatalf("at seq %d got %v seq %d gap %v %.20q", seq, ev.Kind, ev.Seq, ev.Gap, ev.Data)
		}
		if seq == 2 && gaps == 0 {
			t.Fatal("line 1 arrived although the buffer overflowed while detached")
		}
	}
	st, err := c2.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// Dropped lines include some already delivered but not yet acknowledged.
	if lost == 0 || lost > st.DroppedLines || st.BufferedBytes > cfg.BufferBytes {
		t.Errorf("gaps covered %d lines, the shim dropped %d; buffered %d", lost, st.DroppedLines, st.BufferedBytes)
	}
	c2.Ack(1000)
	write(t, c2, "exit 0")
	expectExit(t, c2, cfg)
}

// The window bounds what a Client holds while its owner does not
// acknowledge, and responses keep flowing meanwhile (no deadlock between a
// consumer that waits for a response and a reader that waits for it).
func TestWindowStallsStreamNotRequests(t *testing.T) {
	w := newWitness(t)
	cfg := testConfig(t, w.env())
	cfg.Window = 8 << 10
	c := startShim(t, cfg)
	write(t, c, "emit 1000 100", "note emitted")
	w.expect(t, "emitted")
	// A request is answered although the stream is stalled at the window
	// (TestSessionWindow checks the window's exact arithmetic).
	if _, err := c.Status(t.Context()); err != nil {
		t.Fatal(err)
	}
	// Whatever the shim sent before that response is in the client's queue.
	c.qmu.Lock()
	held := len(c.queue)
	c.qmu.Unlock()
	if perLine := 100 + recordOverhead; held > cfg.Window/perLine+1 {
		t.Errorf("client holds %d lines without acking, window allows %d", held, cfg.Window/perLine+1)
	}
	for seq := uint64(1); seq <= 1000; seq++ {
		ev := next(t, c)
		if ev.Seq != seq {
			t.Fatalf("seq %d, want %d", ev.Seq, seq)
		}
		c.Ack(seq)
	}
	write(t, c, "exit 0")
	expectExit(t, c, cfg)
}

func TestExitWhileDetached(t *testing.T) {
	w := newWitness(t)
	cfg := testConfig(t, w.env())
	c := startShim(t, cfg)
	write(t, c, "stderr something went wrong", "emit 3", "exit 7")
	c.Close()
	w.waitGone(t)

	c2 := attach(t, cfg, 0)
	expectLines(t, c2, 1, 3, 0)
	exit := expectExit(t, c2, cfg)
	if exit.Code != 7 || !strings.Contains(exit.StderrTail, "something went wrong") || exit.ExitedAt.IsZero() {
		t.Errorf("exit = %+v", exit)
	}
	<-c.ShimExited()
}

func TestStatusAfterExit(t *testing.T) {
	cfg := testConfig(t)
	c := startShim(t, cfg)
	write(t, c, "exit 2")
	ev := next(t, c)
	if ev.Kind != EventExit || ev.Seq != 1 {
		t.Fatalf("got %+v, want the exit as seq 1", ev)
	}
	st, err := c.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if st.Running || st.Exit == nil || st.Exit.Code != 2 || !st.StdinClosed {
		t.Errorf("status after exit = %+v", st)
	}
	if err := c.Signal(t.Context(), SignalTerm); !errors.Is(err, ErrExited) {
		t.Errorf("Signal after exit: %v, want ErrExited", err)
	}
	if err := c.Write(t.Context(), []byte("echo x\n")); !errors.Is(err, ErrExited) {
		t.Errorf("Write after exit: %v, want ErrExited", err)
	}
}

func TestWrongShimRefused(t *testing.T) {
	cfg := testConfig(t)
	c := startShim(t, cfg)
	for name, ac := range map[string]AttachConfig{
		"token":    {Socket: cfg.Socket, InstanceID: cfg.InstanceID, Token: NewToken()},
		"instance": {Socket: cfg.Socket, InstanceID: "i-ffffffffffff", Token: cfg.Token},
	} {
		_, err := Attach(t.Context(), ac)
		if !errors.Is(err, ErrWrongShim) || errors.Is(err, ErrNoShim) {
			t.Errorf("wrong %s: %v, want ErrWrongShim", name, err)
		}
	}
	// The refused attempts did not displace the attached agent.
	write(t, c, "echo still here")
	if ev := next(t, c); string(ev.Data) != "still here" {
		t.Errorf("got %q", ev.Data)
	}
}

func TestNewAttachReplacesOld(t *testing.T) {
	cfg := testConfig(t)
	old := startShim(t, cfg)
	c := attach(t, cfg, 0)
	for range old.Events() {
	}
	if !errors.Is(old.Err(), ErrReplaced) {
		t.Errorf("old client Err = %v, want ErrReplaced", old.Err())
	}
	if _, err := old.Status(t.Context()); !errors.Is(err, ErrReplaced) {
		t.Errorf("request on the replaced client: %v, want ErrReplaced", err)
	}
	write(t, c, "echo new")
	if ev := next(t, c); string(ev.Data) != "new" {
		t.Errorf("got %q", ev.Data)
	}
}

func TestNoShim(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]string{"missing": filepath.Join(dir, "none.sock"), "no dir": filepath.Join(dir, "nodir", "x.sock")}
	for name, sock := range cases {
		_, err := Attach(t.Context(), AttachConfig{Socket: sock, InstanceID: "i-0123456789ab", Token: "t"})
		if !errors.Is(err, ErrNoShim) {
			t.Errorf("%s: %v, want ErrNoShim", name, err)
		}
	}
}

// The shim is killed with SIGKILL: its watchdog takes the worker and the
// worker's background child down, and the agent finds no shim.
func TestShimKilledLeavesNoOrphan(t *testing.T) {
	w := newWitness(t)
	cfg := testConfig(t, w.env())
	cfg.Command = shWorker(`exec 3>"$WITNESS"; sleep 1000 & echo started; exec cat`)
	c := startShim(t, cfg)
	if ev := next(t, c); string(ev.Data) != "started" {
		t.Fatalf("got %q", ev.Data)
	}
	st, err := c.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	watchdog := waitExitFunc(t, st.PGID)

	syscall.Kill(c.shim.pid, syscall.SIGKILL)
	<-c.ShimExited()
	w.waitGone(t) // the worker and its sleep are gone
	watchdog()    // and so is the watchdog

	_, err = Attach(t.Context(), AttachConfig{Socket: cfg.Socket, InstanceID: cfg.InstanceID, Token: cfg.Token})
	if !errors.Is(err, ErrNoShim) {
		t.Errorf("Attach after the shim died: %v, want ErrNoShim", err)
	}
}

func TestSignalReachesProcessGroup(t *testing.T) {
	for _, sig := range []Signal{SignalTerm, SignalKill} {
		t.Run(string(sig), func(t *testing.T) {
			w := newWitness(t)
			cfg := testConfig(t, w.env())
			cfg.Command = shWorker(`exec 3>"$WITNESS"; sleep 1000 & echo started; wait`)
			c := startShim(t, cfg)
			if ev := next(t, c); string(ev.Data) != "started" {
				t.Fatalf("got %q", ev.Data)
			}
			if err := c.Signal(t.Context(), sig); err != nil {
				t.Fatal(err)
			}
			w.waitGone(t) // sh and its background sleep both died
			exit := expectExit(t, c, cfg)
			if exit.Code != -1 || exit.Signal != sig {
				t.Errorf("exit = %+v, want killed by %s", exit, sig)
			}
		})
	}
}

func TestSignalRejectsUnknown(t *testing.T) {
	cfg := testConfig(t)
	c := startShim(t, cfg)
	if err := c.Signal(t.Context(), "STOP"); !errors.Is(err, ErrBadSignal) {
		t.Errorf("Signal(STOP) = %v, want ErrBadSignal", err)
	}
}

// Processes a worker leaves behind in its group die with it.
func TestExitSweepsProcessGroup(t *testing.T) {
	w := newWitness(t)
	cfg := testConfig(t, w.env())
	cfg.Command = shWorker(`exec 3>"$WITNESS"; sleep 1000 & echo started; exit 3`)
	c := startShim(t, cfg)
	if ev := next(t, c); string(ev.Data) != "started" {
		t.Fatalf("got %q", ev.Data)
	}
	w.waitGone(t)
	if exit := expectExit(t, c, cfg); exit.Code != 3 {
		t.Errorf("exit = %+v", exit)
	}
}

func TestStop(t *testing.T) {
	t.Run("stdin EOF is enough", func(t *testing.T) {
		cfg := testConfig(t)
		c := startShim(t, cfg)
		if err := c.Stop(t.Context(), StopOptions{CloseStdin: true, Grace: time.Minute}); err != nil {
			t.Fatal(err)
		}
		if exit := expectExit(t, c, cfg); exit.Code != 0 || exit.Signal != "" {
			t.Errorf("exit = %+v, want a clean exit on EOF", exit)
		}
	})
	t.Run("escalates to KILL", func(t *testing.T) {
		cfg := testConfig(t)
		cfg.Command = shWorker(`trap '' TERM; echo started; while :; do sleep 1; done`)
		c := startShim(t, cfg)
		if ev := next(t, c); string(ev.Data) != "started" {
			t.Fatalf("got %q", ev.Data)
		}
		if err := c.Stop(t.Context(), StopOptions{CloseStdin: true, Grace: 20 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		if exit := expectExit(t, c, cfg); exit.Signal != SignalKill {
			t.Errorf("exit = %+v, want killed by KILL", exit)
		}
	})
}

func TestCloseStdin(t *testing.T) {
	cfg := testConfig(t)
	c := startShim(t, cfg)
	write(t, c, "echo before")
	if err := c.CloseStdin(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := c.Write(t.Context(), []byte("echo after\n")); !errors.Is(err, ErrStdinClosed) && !errors.Is(err, ErrExited) {
		t.Errorf("Write after CloseStdin: %v", err)
	}
	if ev := next(t, c); string(ev.Data) != "before" {
		t.Errorf("got %q", ev.Data)
	}
	c.Ack(1)
	expectExit(t, c, cfg)
}

func TestLingerEndsUnclaimedShim(t *testing.T) {
	cfg := testConfig(t)
	cfg.Linger = 10 * time.Millisecond
	c := startShim(t, cfg)
	write(t, c, "exit 0")
	c.Close()
	<-c.ShimExited()
	if _, err := os.Lstat(cfg.Socket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left behind: %v", err)
	}
	if _, err := Attach(t.Context(), AttachConfig{Socket: cfg.Socket, InstanceID: cfg.InstanceID, Token: cfg.Token}); !errors.Is(err, ErrNoShim) {
		t.Errorf("Attach after linger: %v, want ErrNoShim", err)
	}
}

func TestLongSocketPath(t *testing.T) {
	cfg := testConfig(t)
	dir := filepath.Join(filepath.Dir(cfg.Socket), strings.Repeat("state-directory-", 8), strings.Repeat("d", 40))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg.Socket = filepath.Join(dir, "i-0123456789ab.sock")
	if len(cfg.Socket) <= 150 {
		t.Fatalf("socket path only %d bytes", len(cfg.Socket))
	}
	if runtime.GOOS != "linux" {
		_, err := Start(t.Context(), StartConfig{Executable: os.Args[0], Args: []string{"shim"}, Shim: cfg})
		if !errors.Is(err, ErrSocketPathTooLong) {
			t.Fatalf("Start with a long path: %v, want ErrSocketPathTooLong", err)
		}
		return
	}
	c := startShim(t, cfg)
	fi, err := os.Lstat(cfg.Socket)
	if err != nil || fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket %v, %v: want a 0600 socket", fi, err)
	}
	c.Close()
	c2 := attach(t, cfg, 0)
	write(t, c2, "exit 0")
	expectExit(t, c2, cfg)
}

func TestSocketInUse(t *testing.T) {
	cfg := testConfig(t)
	startShim(t, cfg)
	other := cfg
	other.Token = NewToken()
	_, err := Start(t.Context(), StartConfig{Executable: os.Args[0], Args: []string{"shim"}, Shim: other})
	if !errors.Is(err, ErrSocketInUse) {
		t.Errorf("second shim on the same socket: %v, want ErrSocketInUse", err)
	}
}

func TestStaleSocketReplaced(t *testing.T) {
	cfg := testConfig(t)
	c := startShim(t, cfg)
	syscall.Kill(c.shim.pid, syscall.SIGKILL) // leaves its socket file behind
	<-c.ShimExited()
	if _, err := os.Lstat(cfg.Socket); err != nil {
		t.Fatalf("expected a stale socket file: %v", err)
	}
	c2 := startShim(t, cfg)
	write(t, c2, "exit 0")
	expectExit(t, c2, cfg)
}

func TestStartFailures(t *testing.T) {
	t.Run("worker does not exist", func(t *testing.T) {
		cfg := testConfig(t)
		cfg.Command = []string{filepath.Join(t.TempDir(), "no-such-pi")}
		_, err := Start(t.Context(), StartConfig{Executable: os.Args[0], Args: []string{"shim"}, Shim: cfg})
		var re *RemoteError
		if !errors.As(err, &re) || re.Code != CodeSpawn {
			t.Fatalf("Start: %v, want a spawn RemoteError", err)
		}
		if _, err := os.Lstat(cfg.Socket); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("socket left behind: %v", err)
		}
	})
	t.Run("not a shim", func(t *testing.T) {
		cfg := testConfig(t)
		_, err := Start(t.Context(), StartConfig{Executable: "/bin/true", Shim: cfg})
		if err == nil || !strings.Contains(err.Error(), "exited before it was ready") {
			t.Fatalf("Start: %v", err)
		}
	})
	t.Run("invalid config", func(t *testing.T) {
		cfg := testConfig(t)
		cfg.Socket = "relative.sock"
		_, err := Start(t.Context(), StartConfig{Executable: os.Args[0], Args: []string{"shim"}, Shim: cfg})
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != "socket" || !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("Start: %v, want a socket ConfigError", err)
		}
	})
}

// Serve in the test process, so that the race detector and the goroutine
// leak check see the shim's side too.
func TestServeInProcess(t *testing.T) {
	w := newWitness(t)
	cfg := testConfig(t, w.env())
	ready := make(chan Ready, 1)
	cfg.OnReady = func(r Ready) { ready <- r }
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, cfg) }()
	r := <-ready
	if r.WorkerPID <= 0 || r.ShimPID != os.Getpid() {
		t.Fatalf("ready = %+v", r)
	}

	c := attach(t, cfg, 0)
	write(t, c, "emit 100", "ignore-term", "note ready")
	w.expect(t, "ready")
	expectLines(t, c, 1, 50, 0)
	if _, err := c.Status(t.Context()); err != nil { // the ack is applied
		t.Fatal(err)
	}
	c2 := attach(t, cfg, 0) // replaces c
	expectLines(t, c2, 51, 100, 0)

	cancel() // SIGTERM is ignored: the worker gets SIGKILL after KillGrace
	exit := next(t, c2)
	if exit.Kind != EventExit || exit.Exit.Signal != SignalKill {
		t.Fatalf("got %+v, want an exit by KILL", exit)
	}
	c2.Ack(exit.Seq)
	if err := <-served; err != nil {
		t.Errorf("Serve = %v", err)
	}
	if _, err := os.Lstat(cfg.Socket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left behind: %v", err)
	}
	w.waitGone(t)
}

func TestWritesAreAtomic(t *testing.T) {
	cfg := testConfig(t)
	c := startShim(t, cfg)

	// A message over several chunks arrives whole.
	big := strings.Repeat("b", 3*writeChunk+17)
	write(t, c, "echo "+big)
	if ev := next(t, c); string(ev.Data) != big {
		t.Fatalf("got %d bytes, want %d", len(ev.Data), len(big))
	}
	c.Ack(1)
	// A request after an ack reflects it: the next attachment starts after
	// the line (connections are served concurrently, so without this the
	// ack could still be unread when it attaches).
	if _, err := c.Status(t.Context()); err != nil {
		t.Fatal(err)
	}

	// The first chunk of a message whose connection then drops is never
	// written: the next message is the worker's next line.
	if err := c.out.write(frameWrite, append(u32(0), writeMore), []byte("echo cut"), true); err != nil {
		t.Fatal(err)
	}
	c.conn.Close()
	c2 := attach(t, cfg, 0)
	write(t, c2, "echo whole")
	if ev := next(t, c2); string(ev.Data) != "whole" {
		t.Errorf("got %q, want \"whole\"", ev.Data)
	}

	if err := c2.Write(t.Context(), make([]byte, MaxWrite+1)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Write over MaxWrite: %v, want ErrTooLarge", err)
	}
}

// Post sends at once, in order with Write, whole however long; its
// Pending gives the shim's answer, an error once stdin is closed.
func TestPostKeepsOrderAndAnswers(t *testing.T) {
	cfg := testConfig(t)
	c := startShim(t, cfg)
	long := strings.Repeat("x", writeChunk+10)
	var pending []*Pending
	for i := range 6 {
		cmd := fmt.Sprintf("echo cmd %d", i)
		if i == 3 {
			cmd = "echo " + long
		}
		if i%2 == 0 {
			write(t, c, cmd)
			continue
		}
		p, err := c.Post([]byte(cmd + "\n"))
		if err != nil {
			t.Fatalf("Post(%d): %v", i, err)
		}
		pending = append(pending, p)
	}
	for _, p := range pending {
		if err := p.Wait(t.Context()); err != nil {
			t.Errorf("Pending.Wait: %v", err)
		}
	}
	for i := range 6 {
		want := fmt.Sprintf("cmd %d", i)
		if i == 3 {
			want = long
		}
		if ev := next(t, c); string(ev.Data) != want {
			t.Fatalf("line %d: got %.40q (%d bytes), want %.40q", i, ev.Data, len(ev.Data), want)
		}
	}
	c.Ack(6)
	if err := c.CloseStdin(t.Context()); err != nil {
		t.Fatal(err)
	}
	p, err := c.Post([]byte("echo late\n"))
	if err == nil {
		err = p.Wait(t.Context())
	}
	if !errors.Is(err, ErrStdinClosed) && !errors.Is(err, ErrExited) {
		t.Errorf("Post after CloseStdin: %v, want ErrStdinClosed or ErrExited", err)
	}
	expectExit(t, c, cfg)
}

// The agent that starts a shim dies before it reads the readiness line
// (kill -9 during Start): the shim cannot tell it about the worker, and
// whether the agent stored enough to find the shim again is unknown, so
// the shim stops the worker and exits instead of serving it forever.
func TestShimWhoseStarterDiedStopsItsWorker(t *testing.T) {
	w := newWitness(t)
	cfg := testConfig(t, w.env())
	cfg.Command = shWorker(`exec 3>"$WITNESS"; exec cat`)
	config, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	configR, configW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	readyR.Close() // the starter is gone: nobody will read the readiness line
	cmd := exec.Command(os.Args[0], "shim")
	cmd.ExtraFiles = []*os.File{configR, readyW}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	configR.Close()
	readyW.Close()
	configW.Write(config)
	configW.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("shim exited with %v, want 0 after stopping its worker", err)
		}
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		<-exited
		t.Fatal("the shim of a dead starter kept serving its worker")
	}
	// The shim may stop its worker before the worker opened the witness;
	// once nothing of the shim's session is left, nothing can open it.
	awaitSessionEnd(t, cmd.Process.Pid)
	w.release()
	w.waitGone(t) // the worker is gone too
	if _, err := os.Stat(cfg.Socket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left behind: %v", err)
	}
}
