package fleet_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"sync"
	"testing"
	"time"

	"example.com/pifleet/fleet"
	"example.com/pifleet/transport"
)

// execPeer is a test peer with the exec capability whose exec_start is
// scripted by the executable's name: "big" streams more than
// ExecRetainBytes (and one chunk that is not base64) and is killed;
// "hang" starts and never ends. A cwd of /refuse is refused. Every
// exec_start is handed to starts.
func execPeer(t *testing.T, pifleet bool) (*testAgentPeer, chan *transport.ExecStartFrame) {
	p := newTestAgentPeer(t, "box", pifleet)
	starts := make(chan *transport.ExecStartFrame, 16)
	chunk := func(b byte) string { return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, 150<<10)) }
	p.mu.Lock()
	p.caps = []string{transport.CapabilityExec}
	p.script = func(c *transport.Conn, fr transport.Frame, reply func(transport.Frame)) bool {
		switch fr := fr.(type) {
		case *transport.ExecStartFrame:
			starts <- fr
			if fr.Cwd == "/refuse" {
				reply(&transport.ErrorFrame{Code: "exec_failed", Message: "cwd outside the agent's roots"})
				return true
			}
			id := "x-" + fr.Executable
			reply(&transport.ExecStartedFrame{ExecID: id})
			if fr.Executable != "big" {
				return true
			}
			seq := 0.0
			out := func(st transport.Stream, b64 string) {
				p.send(c, &transport.ExecOutputFrame{ExecID: id, Seq: seq, Stream: st, Base64: b64})
				seq++
			}
			out(transport.Stdout, chunk('a'))
			out(transport.Stdout, chunk('b'))
			out(transport.Stdout, "%%not base64%%")
			out(transport.Stdout, chunk('c'))
			out(transport.Stderr, base64.StdEncoding.EncodeToString([]byte("oops\n")))
			out(transport.Stdout, chunk('d'))
			sig := "SIGKILL"
			p.send(c, &transport.ExecExitFrame{ExecID: id, Signal: &sig, DurationMs: 1500})
			return true
		case *transport.ExecAbortFrame:
			switch fr.ExecID {
			case "gone":
				reply(&transport.ErrorFrame{Code: "unknown_exec", Message: "no command gone"})
			case "theirs":
				reply(&transport.ErrorFrame{Code: "forbidden", Message: "not yours"})
			default:
				reply(&transport.ExecAbortedFrame{ExecID: fr.ExecID})
			}
			return true
		case *transport.ExecListFrame:
			reply(&transport.ExecAbortedFrame{ExecID: "?"}) // a confused agent
			return true
		}
		return false
	}
	p.mu.Unlock()
	return p, starts
}

// TestExecStreamsKeepsTheTailAndEndsOnALostAgent: a command's output is
// delivered in order (a chunk that is not base64 is dropped, not passed
// on), the result keeps the last ExecRetainBytes of stdout and says it
// was truncated, a signal death has no exit code; a command running when
// its agent's connection breaks ends at once with ErrNotConnected.
func TestExecStreamsKeepsTheTailAndEndsOnALostAgent(t *testing.T) {
	peer, starts := execPeer(t, true)
	tf := newTestFleet(t, peer)
	ctx := t.Context()

	var mu sync.Mutex
	var started string
	var seqs []int
	var streamed int
	x, err := tf.Exec(ctx, "box", fleet.ExecRequest{Argv: []string{"big", "-v"}, Cwd: "/w", Timeout: 1500 * time.Millisecond,
		OnStart: func(id string) { mu.Lock(); started = id; mu.Unlock() },
		OnOutput: func(c fleet.ExecChunk) {
			mu.Lock()
			defer mu.Unlock()
			if started == "" {
				t.Error("output before OnStart")
			}
			seqs = append(seqs, c.Seq)
			streamed += len(c.Data)
		}})
	if err != nil {
		t.Fatal(err)
	}
	if fr := <-starts; fr.Mode != transport.ExecArgv || fr.Executable != "big" || len(fr.Args) != 1 || fr.Args[0] != "-v" ||
		fr.TimeoutSeconds == nil || *fr.TimeoutSeconds != 1.5 || fr.InstanceID != "" {
		t.Errorf("exec_start = %+v", fr)
	}
	if x.ID() != "x-big" || x.Agent() != "box" {
		t.Errorf("execution %s on %s", x.ID(), x.Agent())
	}
	res, err := x.Wait(ctx)
	if err != nil {
		t.Fatal(err)
	}
	<-x.Done()
	const chunk = 150 << 10
	if len(res.Stdout) != fleet.ExecRetainBytes || !res.StdoutTruncated ||
		!bytes.HasSuffix(res.Stdout, bytes.Repeat([]byte{'d'}, chunk)) || res.Stdout[0] != 'a' {
		t.Errorf("stdout: %d bytes, truncated %v, starts %q", len(res.Stdout), res.StdoutTruncated, res.Stdout[:1])
	}
	if string(res.Stderr) != "oops\n" || res.StderrTruncated {
		t.Errorf("stderr %q truncated %v", res.Stderr, res.StderrTruncated)
	}
	if res.ExitCode != nil || res.Signal != "SIGKILL" || res.Duration != 1500*time.Millisecond || res.ExecID != "x-big" {
		t.Errorf("result %+v", res)
	}
	mu.Lock()
	if started != "x-big" || streamed != 4*chunk+5 || len(seqs) != 5 || seqs[2] != 3 {
		t.Errorf("OnStart %q, streamed %d bytes in chunks %v", started, streamed, seqs)
	}
	mu.Unlock()

	x, err = tf.Exec(ctx, "box", fleet.ExecRequest{Shell: "hang", Cwd: "/w"})
	if err != nil {
		t.Fatal(err)
	}
	if fr := <-starts; fr.Mode != transport.ExecShell || fr.Command != "hang" || fr.TimeoutSeconds != nil {
		t.Errorf("exec_start = %+v", fr)
	}
	gaveUp, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := x.Wait(gaveUp); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait of a running command with a done context = %v, want context.Canceled", err)
	}
	peer.conn().Close()
	if _, err := x.Wait(ctx); !errors.Is(err, fleet.ErrNotConnected) {
		t.Fatalf("Wait after the agent was lost = %v, want ErrNotConnected", err)
	}
}

// TestExecRequestsAndAnswersThatAreRefused: a malformed request is a
// *ConfigError before any frame; the agent's refusals keep their codes.
func TestExecRequestsAndAnswersThatAreRefused(t *testing.T) {
	peer, starts := execPeer(t, true)
	tf := newTestFleet(t, peer)
	ctx := t.Context()
	for name, req := range map[string]fleet.ExecRequest{
		"argv and shell":   {Argv: []string{"true"}, Shell: "true", Cwd: "/w"},
		"neither":          {Cwd: "/w"},
		"no cwd":           {Argv: []string{"true"}},
		"negative timeout": {Argv: []string{"true"}, Cwd: "/w", Timeout: -time.Second},
	} {
		if _, err := tf.Exec(ctx, "box", req); !errors.Is(err, fleet.ErrInvalidConfig) {
			t.Errorf("%s: Exec = %v, want ErrInvalidConfig", name, err)
		}
	}
	var ee *fleet.ExecError
	_, err := tf.Exec(ctx, "box", fleet.ExecRequest{Argv: []string{"true"}, Cwd: "/refuse"})
	if !errors.As(err, &ee) || ee.Code != "exec_failed" || ee.Agent != "box" || !errors.Is(err, fleet.ErrExecFailed) {
		t.Errorf("refused cwd: %v", err)
	}
	if len(starts) != 1 {
		t.Errorf("%d exec_start frames sent, want only the refused one", len(starts))
	}
	if _, err := tf.Exec(ctx, "nowhere", fleet.ExecRequest{Argv: []string{"true"}, Cwd: "/w"}); !errors.Is(err, fleet.ErrUnknownAgent) {
		t.Errorf("unknown agent: %v", err)
	}
	if err := tf.AbortExecution(ctx, "box", "gone"); !errors.Is(err, fleet.ErrUnknownExecution) {
		t.Errorf("abort of an ended command: %v, want ErrUnknownExecution", err)
	}
	if err := tf.AbortExecution(ctx, "box", "theirs"); !errors.As(err, &ee) || ee.Code != "forbidden" {
		t.Errorf("refused abort: %v, want an *ExecError forbidden", err)
	}
	if err := tf.AbortExecution(ctx, "box", "x-1"); err != nil {
		t.Errorf("abort: %v", err)
	}
	if _, err := tf.Executions(ctx, "box"); err == nil {
		t.Error("exec_list answered with the wrong frame was accepted")
	}
	if _, err := tf.Executions(ctx, "nowhere"); !errors.Is(err, fleet.ErrUnknownAgent) {
		t.Errorf("executions of an unknown agent: %v", err)
	}
}

// TestInstanceExecNeedsAPifleetAgent: a v1 agent cannot run a command in
// a worker's tree; a pifleet one is sent the instance id.
func TestInstanceExecNeedsAPifleetAgent(t *testing.T) {
	v1, _ := execPeer(t, false)
	tf := newTestFleet(t, v1)
	inst := spawn(t, tf, "box")
	if _, err := inst.Exec(t.Context(), fleet.ExecRequest{Argv: []string{"pwd"}}); !errors.Is(err, fleet.ErrNotSupported) {
		t.Errorf("exec in a v1 agent's instance: %v, want ErrNotSupported", err)
	}

	peer, starts := execPeer(t, true)
	tf2 := newTestFleet(t, peer)
	inst2 := spawn(t, tf2, "box")
	x, err := inst2.Exec(t.Context(), fleet.ExecRequest{Argv: []string{"pwd"}})
	if err != nil {
		t.Fatal(err)
	}
	if fr := <-starts; fr.InstanceID != inst2.ID() || fr.Cwd != "" {
		t.Errorf("exec_start = %+v, want the instance's id and its tree", fr)
	}
	if err := x.Abort(t.Context()); err != nil {
		t.Errorf("abort: %v", err)
	}
	if _, err := tf2.Instance("nope"); !errors.Is(err, fleet.ErrUnknownInstance) {
		t.Errorf("unknown instance: %v", err)
	}
}

// TestWaitOfAnEndedExecutionIgnoresItsContext: once a command ended, Wait
// returns its result even with a context that is done (select must not
// pick the context at random).
func TestWaitOfAnEndedExecutionIgnoresItsContext(t *testing.T) {
	peer, _ := execPeer(t, true)
	tf := newTestFleet(t, peer)
	for _, onOutput := range []func(fleet.ExecChunk){nil, func(fleet.ExecChunk) {}} {
		x, err := tf.Exec(t.Context(), "box", fleet.ExecRequest{Argv: []string{"big"}, Cwd: "/w", OnOutput: onOutput})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := x.Wait(t.Context()); err != nil {
			t.Fatal(err)
		}
		done, cancel := context.WithCancel(t.Context())
		cancel()
		for range 64 {
			if res, err := x.Wait(done); err != nil || res.Signal != "SIGKILL" {
				t.Fatalf("Wait of an ended command with a done context = %+v, %v", res.Signal, err)
			}
		}
	}
}

// A command whose start the caller stopped waiting for is not left
// running: when the agent's exec_started comes after the caller gave up,
// the fleet aborts the command.
func TestAnExecTheCallerGaveUpOnIsAbortedWhenItStarts(t *testing.T) {
	peer := newTestAgentPeer(t, "box", true)
	starts := make(chan func(), 1)
	aborts := make(chan string, 1)
	peer.mu.Lock()
	peer.caps = []string{transport.CapabilityExec}
	peer.script = func(_ *transport.Conn, fr transport.Frame, reply func(transport.Frame)) bool {
		switch fr := fr.(type) {
		case *transport.ExecStartFrame:
			starts <- func() { reply(&transport.ExecStartedFrame{ExecID: "x-late"}) }
			return true
		case *transport.ExecAbortFrame:
			aborts <- fr.ExecID
			reply(&transport.ExecAbortedFrame{ExecID: fr.ExecID})
			return true
		}
		return false
	}
	peer.mu.Unlock()
	tf := newTestFleet(t, peer)

	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := tf.Exec(ctx, "box", fleet.ExecRequest{Argv: []string{"make"}, Cwd: "/w"})
		errc <- err
	}()
	start := <-starts
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Exec whose caller gave up = %v, want context.Canceled", err)
	}
	start()
	select {
	case id := <-aborts:
		if id != "x-late" {
			t.Errorf("exec_abort of %q, want the late command x-late", id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the command that started after its caller gave up was left running")
	}
}

// A slow OnOutput holds up only its own execution, and what waits for it
// is bounded: beyond 8 MiB the oldest chunks are dropped, and the next
// chunk it gets counts them. Every chunk is either delivered, in order,
// or counted.
func TestASlowOnOutputLosesTheOldestChunksAndIsToldHowMany(t *testing.T) {
	const chunk, n = 150 << 10, 61 // chunks 1..60 are 9 MiB: more than can wait
	peer := newTestAgentPeer(t, "box", true)
	onStart, blocked, release := make(chan struct{}), make(chan struct{}), make(chan struct{})
	data := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{'o'}, chunk))
	peer.mu.Lock()
	peer.caps = []string{transport.CapabilityExec}
	peer.script = func(c *transport.Conn, fr transport.Frame, reply func(transport.Frame)) bool {
		if _, ok := fr.(*transport.ExecStartFrame); !ok {
			return false
		}
		reply(&transport.ExecStartedFrame{ExecID: "x-flood"})
		go func() {
			<-onStart
			for seq := range n {
				if seq == 1 {
					<-blocked // the callback holds chunk 0: the rest must wait
				}
				peer.send(c, &transport.ExecOutputFrame{ExecID: "x-flood", Seq: float64(seq), Stream: transport.Stdout, Base64: data})
			}
			code := 0.0
			peer.send(c, &transport.ExecExitFrame{ExecID: "x-flood", ExitCode: &code})
		}()
		return true
	}
	peer.mu.Unlock()
	tf := newTestFleet(t, peer)

	var got []fleet.ExecChunk
	x, err := tf.Exec(t.Context(), "box", fleet.ExecRequest{Argv: []string{"flood"}, Cwd: "/w",
		OnStart: func(string) { close(onStart) },
		OnOutput: func(c fleet.ExecChunk) {
			if len(got) == 0 {
				close(blocked)
				<-release
			}
			got = append(got, fleet.ExecChunk{Seq: c.Seq, Dropped: c.Dropped})
		}})
	if err != nil {
		t.Fatal(err)
	}
	<-x.Done() // every chunk and the exit arrived while the callback was held
	close(release)
	if _, err := x.Wait(t.Context()); err != nil {
		t.Fatal(err)
	}

	dropped, next := 0, 0
	for _, c := range got {
		if c.Seq != next+c.Dropped {
			t.Fatalf("chunk %d after %d with %d dropped: %v", c.Seq, next-1, c.Dropped, got)
		}
		dropped += c.Dropped
		next = c.Seq + 1
	}
	if next != n || dropped == 0 || (len(got)-1)*chunk > 8<<20 {
		t.Errorf("%d chunks delivered, %d dropped, last %d: want the last chunk, some dropped, at most 8 MiB waiting",
			len(got), dropped, next-1)
	}
}
