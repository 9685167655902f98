//go:build unix

package worker

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"example.com/pifleet/internal/pitest"
)

// waitLimit guards every wait of these tests, so that a broken worker
// fails the test with a message instead of hanging it.
const waitLimit = 60 * time.Second

func newID(t testing.TB) string {
	b := make([]byte, 6)
	rand.Read(b)
	return "i-" + hex.EncodeToString(b)
}

// stateDir is a short private directory (socket paths stay short).
func stateDir(t testing.TB) string {
	dir, err := os.MkdirTemp("", "wk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// piSpec is a worker Spec for a scripted or real pi.
func piSpec(t testing.TB, kind pitest.Kind, opts pitest.Options) Spec {
	t.Helper()
	ps := pitest.Command(t, kind, opts)
	return Spec{
		InstanceID:  newID(t),
		Cwd:         ps.Dir,
		Command:     append([]string{ps.Path}, ps.Args...),
		Env:         ps.Env,
		StateDir:    stateDir(t),
		ShimCommand: []string{os.Args[0], "shim"},
		StopGrace:   10 * time.Second,
	}
}

// helperSpec runs the test binary as one of the TestMain workers.
func helperSpec(t testing.TB, role string) Spec {
	return Spec{
		InstanceID:  newID(t),
		Cwd:         t.TempDir(),
		Command:     []string{os.Args[0], role},
		Env:         os.Environ(),
		StateDir:    stateDir(t),
		ShimCommand: []string{os.Args[0], "shim"},
		StopGrace:   200 * time.Millisecond,
	}
}

func start(t *testing.T, spec Spec) *Worker {
	t.Helper()
	w, err := Start(t.Context(), spec)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	return w
}

// stream reads a worker's events.
type stream struct {
	t  *testing.T
	ch <-chan Event
	// seen is every event read so far.
	seen []Event
}

func newStream(t *testing.T, w *Worker) *stream { return &stream{t: t, ch: w.Events()} }

// next returns the next event; ok is false once Events closed.
func (s *stream) next() (Event, bool) {
	s.t.Helper()
	select {
	case ev, ok := <-s.ch:
		if ok {
			// A dialog's end has no line of its own: it shares the seq of
			// the line before it.
			if n := len(s.seen); n > 0 && (ev.Seq < s.seen[n-1].Seq || ev.Seq == s.seen[n-1].Seq && ev.Kind != KindDialogEnded) {
				s.t.Errorf("event seq %d (%s) after %d: not increasing", ev.Seq, ev.Kind, s.seen[n-1].Seq)
			}
			s.seen = append(s.seen, ev)
		}
		return ev, ok
	case <-time.After(waitLimit):
		s.t.Fatalf("no event within %v; seen: %s", waitLimit, kinds(s.seen))
	}
	return Event{}, false
}

// until reads events until one satisfies match, and returns the events
// read on the way, that one included.
func (s *stream) until(match func(Event) bool) []Event {
	s.t.Helper()
	from := len(s.seen)
	for {
		ev, ok := s.next()
		if !ok {
			s.t.Fatalf("events ended; seen: %s", kinds(s.seen))
		}
		if match(ev) {
			return s.seen[from:]
		}
	}
}

// drain reads to the end of the stream and returns what came.
func (s *stream) drain() []Event {
	s.t.Helper()
	from := len(s.seen)
	for {
		if _, ok := s.next(); !ok {
			return s.seen[from:]
		}
	}
}

func settled(ev Event) bool { return ev.Settled != nil }

func isKind(k string) func(Event) bool { return func(ev Event) bool { return ev.Kind == k } }

func responseTo(id string) func(Event) bool {
	return func(ev Event) bool {
		if ev.Kind != KindResponse {
			return false
		}
		var r struct{ ID string }
		json.Unmarshal(ev.Raw, &r)
		return r.ID == id
	}
}

func kinds(evs []Event) string {
	var b strings.Builder
	for _, ev := range evs {
		b.WriteString(ev.Kind)
		b.WriteByte(' ')
	}
	return b.String()
}

func count(evs []Event, match func(Event) bool) int {
	n := 0
	for _, ev := range evs {
		if match(ev) {
			n++
		}
	}
	return n
}

func send(t *testing.T, w *Worker, cmd map[string]any) {
	t.Helper()
	raw, _ := json.Marshal(cmd)
	if err := w.Send(raw); err != nil {
		t.Fatalf("Send(%s): %v", raw, err)
	}
}

func prompt(t *testing.T, w *Worker, id, message string) {
	t.Helper()
	send(t, w, map[string]any{"id": id, "type": "prompt", "message": message})
}

// stopAndDrain stops the worker and reads its stream to the end.
func stopAndDrain(t *testing.T, w *Worker, s *stream) (forced bool, exit *Exit) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	type result struct {
		forced bool
		err    error
	}
	done := make(chan result, 1)
	go func() {
		f, err := w.Stop(ctx)
		done <- result{f, err}
	}()
	for _, ev := range s.drain() {
		if ev.Exit != nil {
			exit = ev.Exit
		}
	}
	r := <-done
	waitDone(t, w)
	if r.err != nil {
		t.Fatalf("Stop: %v", r.err)
	}
	if exit == nil {
		t.Fatal("no Exit event after Stop")
	}
	return r.forced, exit
}

// witness is a FIFO that a tool process holds open for writing: opened
// reports that it holds it, gone that every holder has exited (no orphan
// left), without sleeping.
type witness struct {
	path   string
	opened chan struct{}
	gone   chan struct{}
}

func newWitness(t *testing.T) *witness {
	t.Helper()
	w := &witness{path: filepath.Join(t.TempDir(), "witness"), opened: make(chan struct{}), gone: make(chan struct{})}
	if err := syscall.Mkfifo(w.path, 0o600); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(w.gone)
		f, err := os.Open(w.path) // until a writer opens it
		close(w.opened)
		if err != nil {
			return
		}
		defer f.Close()
		bufio.NewReader(f).ReadString(0) // until every writer is gone
	}()
	t.Cleanup(func() {
		if f, err := os.OpenFile(w.path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
		<-w.gone
	})
	return w
}

func (w *witness) wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitLimit):
		t.Fatalf("witness: not %s within %v", what, waitLimit)
	}
}

// alive reports whether pid names a process that is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return false
	}
	state := s[i+2]
	return state != 'Z' && state != 'X'
}

// waitDone waits until the Worker released everything (its shim reaped).
func waitDone(t *testing.T, w *Worker) {
	t.Helper()
	select {
	case <-w.Done():
	case <-time.After(waitLimit):
		t.Fatalf("worker not done within %v", waitLimit)
	}
}

// waitShimGone waits until the shim that a detached Worker launched has
// exited (another Worker adopted and ended it).
func waitShimGone(t *testing.T, w *Worker) {
	t.Helper()
	if ch := w.gen.c.ShimExited(); ch != nil {
		select {
		case <-ch:
		case <-time.After(waitLimit):
			t.Fatalf("shim still running %v after its worker ended", waitLimit)
		}
	}
}

func testBinary() string { return os.Args[0] }
