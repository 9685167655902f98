//go:build unix

package shim

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The test binary plays every process of these tests, chosen by its first
// argument: the shim (exactly as `pifleet-agent shim` would), a fake worker,
// and a separate agent process that a test kills with SIGKILL.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "shim":
			os.Exit(Main(os.Args[2:]))
		case "fakeworker":
			os.Exit(fakeWorker())
		case "holder":
			os.Exit(holder(os.Args[2:]))
		}
	}
	// Race-enabled children otherwise sleep a second before exiting.
	if os.Getenv("GORACE") == "" {
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	goleak.VerifyTestMain(m)
}

// fakeWorker is a line-command worker. It reads commands from stdin and
// exits 0 at EOF, like pi:
//
//	echo TEXT          print TEXT
//	emit N [SIZE]      print "line 1" … "line N", padded with x to SIZE bytes
//	print QUOTED       print the Go-quoted string as is (no LF added)
//	big N              print one line of N bytes
//	stderr TEXT        print TEXT on stderr
//	note TEXT          write TEXT on the witness FIFO ($WITNESS)
//	await              read one line from the trigger FIFO ($TRIGGER)
//	ignore-term        ignore SIGTERM
//	exit CODE          exit with CODE
func fakeWorker() int {
	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	var witness *os.File
	if path := os.Getenv("WITNESS"); path != "" {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 3
		}
		witness = f
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(nil, 64<<20)
	for in.Scan() {
		cmd, arg, _ := strings.Cut(in.Text(), " ")
		switch cmd {
		case "echo":
			fmt.Fprintln(out, arg)
		case "emit":
			nStr, sizeStr, _ := strings.Cut(arg, " ")
			n, _ := strconv.Atoi(nStr)
			size, _ := strconv.Atoi(sizeStr)
			for i := 1; i <= n; i++ {
				line := "line " + strconv.Itoa(i)
				if pad := size - len(line); pad > 0 {
					line += strings.Repeat("x", pad)
				}
				out.WriteString(line + "\n")
			}
		case "print":
			s, err := strconv.Unquote(arg)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 3
			}
			out.WriteString(s)
		case "big":
			n, _ := strconv.Atoi(arg)
			out.Write(bytes.Repeat([]byte{'a'}, n))
			out.WriteString("\n")
		case "stderr":
			fmt.Fprintln(os.Stderr, arg)
		case "note":
			out.Flush()
			fmt.Fprintln(witness, arg)
		case "await":
			out.Flush()
			f, err := os.Open(os.Getenv("TRIGGER"))
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 3
			}
			bufio.NewReader(f).ReadString('\n')
			f.Close()
		case "ignore-term":
			signal.Ignore(syscall.SIGTERM)
		case "exit":
			out.Flush()
			code, _ := strconv.Atoi(arg)
			return code
		default:
			fmt.Fprintf(os.Stderr, "unknown command %q\n", cmd)
			return 3
		}
		out.Flush()
	}
	out.Flush()
	return 0
}

// holder is an agent in a process of its own: it attaches, has the worker
// emit lines, acknowledges some of them, says so on stdout, and waits to be
// killed. Arguments: socket, instance id, token, lines to read, seq to ack,
// then commands for the worker.
func holder(args []string) int {
	if len(args) < 5 {
		return 2
	}
	ctx := context.Background()
	c, err := Attach(ctx, AttachConfig{Socket: args[0], InstanceID: args[1], Token: args[2]})
	if err != nil {
		fmt.Println("attach:", err)
		return 1
	}
	read, _ := strconv.ParseUint(args[3], 10, 64)
	ack, _ := strconv.ParseUint(args[4], 10, 64)
	for _, cmd := range args[5:] {
		if err := c.Write(ctx, []byte(cmd+"\n")); err != nil {
			fmt.Println("write:", err)
			return 1
		}
	}
	for ev := range c.Events() {
		if ev.Seq >= read {
			break
		}
	}
	if err := c.Ack(ack); err != nil {
		fmt.Println("ack:", err)
		return 1
	}
	// Acks are ordered with requests: this status reflects the ack.
	st, err := c.Status(ctx)
	if err != nil {
		fmt.Println("status:", err)
		return 1
	}
	fmt.Printf("acked %d\n", st.AckedThrough)
	os.Stdin.Read(make([]byte, 1)) // until killed
	return 0
}

// witness is a FIFO a worker (and every process that inherits its
// descriptor) holds open for writing. Notes come in as lines; gone closes
// when the last holder has exited, which is how tests see, without
// sleeping, that a worker and its children are all dead.
type witness struct {
	path  string
	notes chan string
	gone  chan struct{}
}

func newWitness(t *testing.T) *witness {
	t.Helper()
	w := &witness{path: filepath.Join(t.TempDir(), "witness"), notes: make(chan string, 100), gone: make(chan struct{})}
	if err := syscall.Mkfifo(w.path, 0o600); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(w.gone)
		f, err := os.Open(w.path) // blocks until the worker opens it
		if err != nil {
			return
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			w.notes <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		w.release()
		<-w.gone
	})
	return w
}

func (w *witness) env() string { return "WITNESS=" + w.path }

func (w *witness) expect(t *testing.T, note string) {
	t.Helper()
	select {
	case got := <-w.notes:
		if got != note {
			t.Fatalf("witness note %q, want %q", got, note)
		}
	case <-w.gone:
		t.Fatalf("witness closed, waiting for note %q", note)
	}
}

// waitGone waits until every holder of the witness has exited.
// release lets the witness's reader go if no worker ever opened the FIFO:
// it opens and closes the other end itself. Call it only once no worker
// can open the FIFO any more, or gone may close while a worker still runs.
func (w *witness) release() {
	if f, err := os.OpenFile(w.path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
		f.Close()
	}
}

func (w *witness) waitGone(t *testing.T) {
	t.Helper()
	for {
		select {
		case <-w.notes:
		case <-w.gone:
			return
		}
	}
}

// trigger is a FIFO a fake worker's "await" reads one line from.
func newTrigger(t *testing.T) (path string, fire func()) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "trigger")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, func() {
		if err := os.WriteFile(path, []byte("go\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// testConfig is a shim configuration for a fake worker in a fresh state
// directory.
func testConfig(t testing.TB, env ...string) Config {
	t.Helper()
	dir, err := os.MkdirTemp("", "shim")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return Config{
		InstanceID: "i-0123456789ab",
		Token:      NewToken(),
		Socket:     filepath.Join(dir, "i-0123456789ab.sock"),
		Command:    []string{os.Args[0], "fakeworker"},
		Env:        append(os.Environ(), env...),
		Linger:     time.Minute,
		KillGrace:  time.Millisecond,
	}
}

// shWorker runs script with /bin/sh.
func shWorker(script string) []string { return []string{"/bin/sh", "-c", script} }

// startShim starts a shim for cfg from the test binary. At cleanup it
// detaches, kills a shim still running, and fails the test when the shim's
// log shows a data race or a panic.
func startShim(t testing.TB, cfg Config) *Client {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "shim.log")
	c, err := Start(t.Context(), StartConfig{
		Executable: os.Args[0],
		Args:       []string{"shim"},
		LogPath:    logPath,
		Shim:       cfg,
	})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		c.Close()
		select {
		case <-c.ShimExited():
		default:
			syscall.Kill(c.shim.pid, syscall.SIGKILL)
			<-c.ShimExited()
		}
		log, _ := os.ReadFile(logPath)
		if bytes.Contains(log, []byte("DATA RACE")) || bytes.Contains(log, []byte("panic:")) {
			t.Errorf("shim log:\n%s", log)
		}
	})
	return c
}

func attach(t *testing.T, cfg Config, resumeFrom uint64) *Client {
	t.Helper()
	c, err := Attach(t.Context(), AttachConfig{Socket: cfg.Socket, InstanceID: cfg.InstanceID, Token: cfg.Token, ResumeFrom: resumeFrom})
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func write(t testing.TB, c *Client, cmds ...string) {
	t.Helper()
	for _, cmd := range cmds {
		if err := c.Write(t.Context(), []byte(cmd+"\n")); err != nil {
			t.Fatalf("Write(%q): %v", cmd, err)
		}
	}
}

// next returns the next event, failing when the stream ends first.
func next(t testing.TB, c *Client) Event {
	t.Helper()
	ev, ok := <-c.Events()
	if !ok {
		t.Fatalf("events ended early: %v", c.Err())
	}
	return ev
}

// expectLines reads lines from..to of an "emit" and acknowledges them.
func expectLines(t *testing.T, c *Client, from, to uint64, seqOffset uint64) {
	t.Helper()
	for i := from; i <= to; i++ {
		ev := next(t, c)
		want := fmt.Sprintf("line %d", i)
		if ev.Kind != EventLine || ev.Seq != i+seqOffset || string(ev.Data) != want {
			t.Fatalf("got %v seq %d %q, want line seq %d %q", ev.Kind, ev.Seq, ev.Data, i+seqOffset, want)
		}
	}
	if err := c.Ack(to + seqOffset); err != nil {
		t.Fatal(err)
	}
}

// expectExit reads the exit event, acknowledges it, and checks that the
// shim then finishes: the stream ends cleanly and the socket is gone.
func expectExit(t testing.TB, c *Client, cfg Config) ExitStatus {
	t.Helper()
	ev := next(t, c)
	if ev.Kind != EventExit {
		t.Fatalf("got %v %q, want the exit", ev.Kind, ev.Data)
	}
	if err := c.Ack(ev.Seq); err != nil {
		t.Fatal(err)
	}
	for ev := range c.Events() {
		t.Errorf("event after the exit: %+v", ev)
	}
	if err := c.Err(); err != nil {
		t.Errorf("Err after the acknowledged exit = %v, want nil", err)
	}
	if _, err := os.Lstat(cfg.Socket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket still there after the shim finished: %v", err)
	}
	return *ev.Exit
}
