//go:build unix

package fleet_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"example.com/pifleet/fleet"
	"example.com/pifleet/fleet/agent"
	"example.com/pifleet/fleet/internal/streamdelta"
	"example.com/pifleet/internal/netfault"
	"example.com/pifleet/internal/pitest"
	"example.com/pifleet/transport"
)

// answerSizes are the answers the streaming benchmarks stream, in
// 16-character chunks.
var answerSizes = []int{2_000, 20_000, 200_000}

// streamModes: "whole" is every event as pi wrote it (a TypeScript
// server, or an agent with NoEventDelta); "delta" is event_delta with
// every update (a server with WithEveryUpdate); "joined" is event_delta
// with the chunks of a text that wait in one frame joined (the default).
var streamModes = []string{"whole", "delta", "joined"}

// answerText is an answer of n characters.
func answerText(n int) string { return strings.Repeat("0123456789abcdef", n/16+1)[:n] }

// BenchmarkStreamedAnswer streams one answer per op through the whole
// stack: the SDK, the real agent daemon, its shim and the scripted worker
// (16-character chunks), with a counting proxy between server and agent.
// It reports the bytes agent → server per answer and per character
// (wire/char), the message_update events the prompt's OnEvent got per
// second, and the CPU per answer of this process (server, agent and
// proxy), of the shim and of the worker (processes of their own).
func BenchmarkStreamedAnswer(b *testing.B) {
	for _, mode := range streamModes {
		for _, size := range answerSizes {
			b.Run(fmt.Sprintf("%s/%dKB", mode, size/1000), func(b *testing.B) { benchStreamedAnswer(b, mode, size, 16) })
		}
	}
}

// BenchmarkSmallUpdates is a long run of small updates: answers of 1,000
// characters streamed a character at a time (1,000 message_update events
// per answer, each with a partial message of at most 1 KB), through the
// same stack as BenchmarkStreamedAnswer. "alone" is the ceiling: the same
// worker process with nothing of pifleet, prompted over its pipes by this
// process, which only splits its output in lines.
func BenchmarkSmallUpdates(b *testing.B) {
	for _, mode := range streamModes {
		b.Run(mode, func(b *testing.B) { benchStreamedAnswer(b, mode, 1000, 1) })
	}
	b.Run("alone", func(b *testing.B) { benchWorkerAlone(b, 1000, 1) })
}

// benchWorkerAlone streams answers as benchStreamedAnswer does, straight
// from the scripted worker's process: the prompt on its stdin, its stdout
// read up to agent_end, then the get_state the agent sends to see the
// worker settled and its answer. It reports what benchStreamedAnswer does
// of the worker.
func benchWorkerAlone(b *testing.B, size, chunk int) {
	spec := pitest.Command(b, pitest.Scripted, pitest.Options{NoSession: true, Env: []string{"PIFLEET_FAUX_CHUNK=" + strconv.Itoa(chunk)}})
	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Env, cmd.Dir = spec.Env, spec.Dir
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
	lines := bufio.NewReaderSize(stdout, 1<<20)
	until := func(marker string) int {
		n := 0
		for {
			line, err := lines.ReadSlice('\n')
			if err != nil {
				b.Fatalf("worker output: %v", err)
			}
			if bytes.Contains(line, []byte(`"type":"message_update"`)) {
				n++
			}
			if bytes.Contains(line, []byte(marker)) {
				return n
			}
		}
	}
	prompt, _ := json.Marshal(map[string]string{"type": "prompt", "message": "say: " + answerText(size)})
	prompt = append(prompt, '\n')
	getState := []byte(`{"id":"s","type":"get_state"}` + "\n")
	var took, workerCPU time.Duration
	for b.Loop() {
		c0, t0 := procCPU(cmd.Process.Pid), time.Now()
		if _, err := stdin.Write(prompt); err != nil {
			b.Fatal(err)
		}
		if n, want := until(`"type":"agent_end"`), workerUpdates(size, chunk); n != want {
			b.Fatalf("%d updates, want %d", n, want)
		}
		if _, err := stdin.Write(getState); err != nil {
			b.Fatal(err)
		}
		until(`"command":"get_state"`)
		took += time.Since(t0)
		workerCPU += procCPU(cmd.Process.Pid) - c0
	}
	n := float64(b.N)
	b.ReportMetric(float64(workerUpdates(size, chunk))*n/took.Seconds(), "worker-updates/s")
	b.ReportMetric(float64(workerCPU.Microseconds())/1000/n, "worker-cpu-ms/op")
}

// workerUpdates is how many message_update events the scripted worker
// writes for an answer of size characters: one per chunk, and one to
// start and one to end the text.
func workerUpdates(size, chunk int) int { return (size+chunk-1)/chunk + 2 }

func benchStreamedAnswer(b *testing.B, mode string, size, chunk int) {
	defer fleet.SetLockCheck(fleet.SetLockCheck(false)) // the tests' lock check reads the stack at every Lock
	reg := b.TempDir()
	publish(b, reg, "plain", `{}`)
	addr, ps := startAgentWith(b, pitest.Scripted, reg, func(c *agent.Config) {
		c.BehindProxy = true
		c.NoEventDelta = mode == "whole"
		c.PeerQueueBytes = 1 << 30 // the whole stream of a 200 KB answer is GBs: measure it, do not drop it
		c.Env = append(c.Env, "PIFLEET_FAUX_CHUNK="+strconv.Itoa(chunk))
	})
	proxy, err := netfault.Start(addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = proxy.Close() })
	var fleetOpts []fleet.Option
	if mode == "delta" {
		fleetOpts = append(fleetOpts, fleet.WithEveryUpdate())
	}
	tf := startFleet(b, b.TempDir(), reg, []fleet.Agent{{Name: "worker-01", Addresses: []string{proxy.Addr()}}}, fleetOpts...)
	tf.waitAgent(b, "worker-01", transport.StateEstablished)
	inst, err := tf.Spawn(b.Context(), fleet.SpawnOptions{Agent: "worker-01", Cwd: ps.Dir, Bundle: "plain"})
	if err != nil {
		b.Fatal(err)
	}
	tf.sub.Close()
	text := answerText(size)
	updates := 0
	opts := fleet.PromptOptions{OnEvent: func(ev fleet.Event) {
		if ev.Type == "message_update" {
			updates++
		}
	}}
	var wire int64
	var cpu, took, shimCPU, workerCPU time.Duration
	// The instance's shim and worker, found once: a walk of /proc at every
	// answer left garbage that the next answer's collections counted.
	procs := childProcs()
	for b.Loop() {
		p0 := procs.cpu() // read before and after what it measures
		w0, c0, t0 := proxy.Forwarded(netfault.Downstream), cpuTime(), time.Now()
		got, err := inst.Prompt(b.Context(), "say: "+text, opts)
		if err != nil {
			b.Fatal(err)
		}
		took += time.Since(t0)
		wire += proxy.Forwarded(netfault.Downstream) - w0
		cpu += cpuTime() - c0
		p1 := procs.cpu()
		shimCPU += p1.shim - p0.shim
		workerCPU += p1.worker - p0.worker
		if got != text {
			b.Fatalf("answer of %d characters, want %d", len(got), len(text))
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(wire)/n, "wire-B/op")
	b.ReportMetric(float64(wire)/n/float64(size), "wire/char")
	b.ReportMetric(float64(updates)/took.Seconds(), "updates/s")
	// What the stack carried a second, joined or not.
	worker := workerUpdates(size, chunk)
	b.ReportMetric(float64(worker)*n/took.Seconds(), "worker-updates/s")
	b.ReportMetric(float64(cpu.Microseconds())/1000/n, "cpu-ms/op")
	b.ReportMetric(float64(shimCPU.Microseconds())/1000/n, "shim-cpu-ms/op")
	b.ReportMetric(float64(workerCPU.Microseconds())/1000/n, "worker-cpu-ms/op")
	// What pifleet's own parts (this process and the shim) carry per
	// second of CPU, apart from what the worker takes to write them.
	if stack := cpu + shimCPU; stack > 0 {
		b.ReportMetric(float64(worker)*n/stack.Seconds(), "stack-updates/cpu-s")
	}
	if err := inst.Stop(b.Context()); err != nil {
		b.Fatal(err)
	}
}

// processCPU is the CPU time of this process's children (the shims the
// agent started) and of their descendants (the workers), as /proc has
// it: a tick is 10 ms, so it is read over a whole answer.
type processCPU struct{ shim, worker time.Duration }

// processes are the pids of this process's children and of their
// descendants.
type processes struct{ shims, workers []int }

func childProcs() processes {
	var out processes
	for _, shim := range childPids(os.Getpid()) {
		out.shims = append(out.shims, shim)
		out.workers = append(out.workers, descendants(shim)...)
	}
	return out
}

func (ps processes) cpu() processCPU {
	var out processCPU
	for _, p := range ps.shims {
		out.shim += procCPU(p)
	}
	for _, p := range ps.workers {
		out.worker += procCPU(p)
	}
	return out
}

// childPids lists pid's children (every thread's).
func childPids(pid int) []int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, t := range tasks {
		b, _ := os.ReadFile(t)
		for _, f := range strings.Fields(string(b)) {
			if p, err := strconv.Atoi(f); err == nil {
				out = append(out, p)
			}
		}
	}
	return out
}

func descendants(pid int) []int {
	var out []int
	for _, c := range childPids(pid) {
		out = append(append(out, c), descendants(c)...)
	}
	return out
}

// procCPU is a process's user and system time from /proc/<pid>/stat (0
// once it is gone).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command's closing parenthesis: utime and stime
	// are the 12th and 13th of them.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond // USER_HZ is 100 on Linux
}

// BenchmarkServerStreamCPU is the server's part alone: an in-process
// agent peer sends the frames of one streamed answer (message_start …
// message_end, coded before the timer as the agent codes them) and the op
// ends when the server handled the message_end. It reports this process's
// CPU per answer (the server's decoding, rebuilding and handling, plus the
// peer's encoding of the frames, which peer-encode-ms/op measures apart)
// and the bytes of the frames per character of the answer.
func BenchmarkServerStreamCPU(b *testing.B) {
	defer fleet.SetLockCheck(fleet.SetLockCheck(false)) // the tests' lock check reads the stack at every Lock
	for _, mode := range streamModes {
		for _, size := range answerSizes {
			b.Run(fmt.Sprintf("%s/%dKB", mode, size/1000), func(b *testing.B) { benchServerStream(b, mode, size) })
		}
	}
}

// scriptedLines is the message_start … message_end of an answer streamed
// as the scripted worker does.
func scriptedLines(text string, chunk int) [][]byte {
	partial := func(s string) string {
		q, _ := json.Marshal(s)
		return `{"role":"assistant","content":[{"type":"text","text":` + string(q) + `}],"api":"pifleet-faux","provider":"faux","model":"faux-1",` +
			`"usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"totalTokens":0,"cost":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"stopReason":"stop","timestamp":1795979568094}`
	}
	update := func(step, p string) []byte {
		return []byte(`{"type":"message_update","assistantMessageEvent":{` + step + `,"partial":` + p + `},"message":` + p + `}`)
	}
	lines := [][]byte{[]byte(`{"type":"message_start","message":` + partial("") + `}`),
		update(`"type":"text_start","contentIndex":0`, partial(""))}
	for i := 0; i < len(text); i += chunk {
		piece, _ := json.Marshal(text[i:min(i+chunk, len(text))])
		lines = append(lines, update(`"type":"text_delta","contentIndex":0,"delta":`+string(piece), partial(text[:min(i+chunk, len(text))])))
	}
	q, _ := json.Marshal(text)
	lines = append(lines, update(`"type":"text_end","contentIndex":0,"content":`+string(q), partial(text)))
	return append(lines, []byte(`{"type":"message_end","message":`+partial(text)+`}`))
}

// streamFrames codes lines as an agent does for a whole or a delta
// server, seqs from first.
func streamFrames(id string, lines [][]byte, first uint64, mode string) []transport.Frame {
	var out []transport.Frame
	var enc streamdelta.Encoder
	var ch streamdelta.Chain
	whole, batch := mode == "whole", streamdelta.NewBatch(id)
	if mode == "joined" {
		batch = streamdelta.NewCoalescingBatch(id)
	}
	for i, l := range lines {
		seq := first + uint64(i)
		var head struct{ Type string }
		_ = json.Unmarshal(l, &head)
		kind := head.Type
		if whole || !streamdelta.Carries(kind, true) {
			s := float64(seq)
			out = append(out, &transport.EventFrame{InstanceID: id, Event: l, Seq: &s})
			continue
		}
		c := enc.Encode(seq, l)
		batch.Add(&ch, &c)
		if batch.Len() >= 1024 || batch.Size() >= 128<<10 || !streamdelta.Waits(kind) {
			out = append(out, batch.Frame())
		}
	}
	return out
}

func benchServerStream(b *testing.B, mode string, size int) {
	peer := newTestAgentPeer(b, "box", true)
	tf := newTestFleet(b, peer)
	inst := spawn(b, tf, "box")
	drainPeer(b, peer)
	lines := scriptedLines(answerText(size), 16)
	c := peer.conn()
	// The frames' encoding, which the peer pays in this process, measured
	// once apart.
	frames := streamFrames(inst.ID(), lines, 1<<20, mode)
	c0 := cpuTime()
	var wire int
	for _, f := range frames {
		raw, err := transport.MarshalFrame(f)
		if err != nil {
			b.Fatal(err)
		}
		wire += len(raw)
	}
	encode := cpuTime() - c0
	// A subscription of its own, read all along and with room for a whole
	// answer's changes: a full one drops changes, and the op waits for
	// the last (with the tests' 4,096, a 200 KB answer's message_end could
	// be dropped and the op never end).
	tf.sub.Close()
	sub := tf.Subscribe(2 * len(lines))
	defer sub.Close()
	ends := make(chan struct{}, 1)
	go func() {
		for ch := range sub.C {
			if ch.Kind == fleet.ChangeEvent && ch.InstanceID == inst.ID() && ch.Event == "message_end" {
				ends <- struct{}{}
			}
		}
	}()
	var cpu time.Duration
	next := uint64(1 << 20)
	for b.Loop() {
		frames := streamFrames(inst.ID(), lines, next, mode) // fresh seqs: the server drops seqs it saw
		next += uint64(len(lines))
		c0 := cpuTime()
		for _, f := range frames {
			if err := c.Send(b.Context(), f); err != nil {
				b.Fatal(err)
			}
		}
		select {
		case <-ends:
		case <-time.After(10 * time.Minute):
			b.Fatalf("the server never handled the message_end (%d changes dropped)", sub.Dropped())
		}
		cpu += cpuTime() - c0
	}
	if d := sub.Dropped(); d > 0 {
		b.Fatalf("the subscription dropped %d changes", d)
	}
	n := float64(b.N)
	b.ReportMetric(float64(cpu.Microseconds())/1000/n, "cpu-ms/op")
	b.ReportMetric(float64(encode.Microseconds())/1000, "peer-encode-ms/op")
	b.ReportMetric(float64(wire)/float64(size), "wire/char")
	b.ReportMetric(float64(len(lines))*n/b.Elapsed().Seconds(), "events/s")
}
