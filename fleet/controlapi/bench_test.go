package controlapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"example.com/pifleet/fleet/controlapi/internal/answertest"
)

// BenchmarkStatusRoundTrip measures one request and answer through the
// API over the unix socket (the backend answers at once).
func BenchmarkStatusRoundTrip(b *testing.B) {
	for name, addr := range map[string]func(b *testing.B) Addr{
		"unix": func(b *testing.B) Addr { return DefaultAddr(benchDir(b)) },
		"tcp":  func(*testing.B) Addr { return Addr{Network: "tcp", Address: "127.0.0.1:0"} },
	} {
		b.Run(name, func(b *testing.B) {
			be := newRecordingBackend()
			be.status = Status{Instances: make([]Instance, 10)}
			c := benchServe(b, be, addr(b))
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Status(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkWatch measures changes delivered per second through the event
// stream over the unix socket.
func BenchmarkWatch(b *testing.B) {
	be := newRecordingBackend()
	c := benchServe(b, be, DefaultAddr(benchDir(b)))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := c.Watch(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	serverCtx := <-be.watchCtx
	ch := Change{Kind: ChangeInstanceState, Agent: "gpu-1", InstanceID: "i-0123456789", From: "idle", To: "running", Event: "promptDelivered"}
	go func() {
		for {
			select {
			case be.changes <- ch:
			case <-serverCtx.Done():
				return
			}
		}
	}()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Next(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "changes/s")
}

func benchDir(b *testing.B) string {
	dir, err := os.MkdirTemp("", "capib")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// benchServe serves be at addr for the benchmark and returns a client
// (with the token in TCP mode).
func benchServe(b *testing.B, be Backend, addr Addr) *Client {
	l, err := Listen(addr, ListenOptions{})
	if err != nil {
		b.Fatal(err)
	}
	var opts []ServerOption
	var copts []ClientOption
	if !addr.IsUnix() {
		addr.Address = l.Addr().String()
		opts, copts = []ServerOption{WithToken("t")}, []ClientOption{WithBearer("t")}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, l, NewServer(be, opts...), time.Second) }()
	c, err := NewClient(addr, copts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		c.Close()
		cancel()
		<-done
	})
	return c
}

// BenchmarkWatchStreamedAnswer streams one answer per op (16-character
// chunks, as the fleet holds it: each update rebuilt from the agent's
// deltas, written out only when read) through the server to one watcher
// that reads every change with the Client over the unix socket. It
// reports the watch's bytes per answer and per character of the answer,
// and this process's CPU per answer (the backend's rebuilding, the
// server and the watcher). "whole" is a watcher that does not ask for
// deltas (every update's whole partial message); "delta" the Client's
// default, which rebuilds every whole event for its caller; "delta-raw"
// a watcher that reads the deltas without rebuilding (as the web page
// does, applying each to what it shows): the server's own cost.
func BenchmarkWatchStreamedAnswer(b *testing.B) {
	for _, mode := range []string{"whole", "delta", "delta-raw"} {
		for _, size := range []int{2_000, 20_000, 200_000} {
			b.Run(fmt.Sprintf("%s/%dKB", mode, size/1000), func(b *testing.B) { benchWatchAnswer(b, mode, size) })
		}
	}
}

func benchWatchAnswer(b *testing.B, mode string, size int) {
	text := answertest.Text(size)
	be := newRecordingBackend()
	addr := DefaultAddr(benchDir(b))
	l, err := Listen(addr, ListenOptions{})
	if err != nil {
		b.Fatal(err)
	}
	counted := &countingListener{Listener: l}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, counted, NewServer(be), time.Second) }()
	c, err := NewClient(addr)
	if err != nil {
		b.Fatal(err)
	}
	c.wholeWatch = mode == "whole"
	b.Cleanup(func() {
		c.Close()
		cancel()
		<-done
	})
	var next func() (Change, error)
	if mode == "delta-raw" {
		es, err := c.openEvents(ctx, "/watch?"+WatchDeltasParam+"=1", "watch")
		if err != nil {
			b.Fatal(err)
		}
		defer es.Close()
		next = func() (Change, error) {
			data, err := es.r.next()
			if bytes.Contains(data, []byte(`"event":"message_end"`)) {
				var w wireChange
				err = json.Unmarshal(data, &w)
				return w.Change, err
			}
			return Change{}, err
		}
	} else {
		s, err := c.Watch(ctx)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		next = s.Next
	}
	serverCtx := <-be.watchCtx
	var wire int64
	var cpu time.Duration
	b.ReportAllocs()
	for b.Loop() {
		w0, c0 := counted.written.Load(), cpuTime()
		// The fleet's side: the answer's events as the agent's deltas
		// rebuild them (fresh lines: nothing written out yet).
		changes := answerChanges("i-1", text)
		go func() {
			for _, ch := range changes {
				select {
				case be.changes <- ch:
				case <-serverCtx.Done():
					return
				}
			}
		}()
		for range changes {
			ch, err := next()
			if err != nil {
				b.Fatal(err)
			}
			if ch.Event == "message_end" && !bytes.Contains(ch.Data, []byte(text[len(text)-16:])) {
				b.Fatalf("message_end lacks the answer: %.200s", ch.Data)
			}
		}
		wire += counted.written.Load() - w0
		cpu += cpuTime() - c0
	}
	n := float64(b.N)
	b.ReportMetric(float64(wire)/n, "wire-B/op")
	b.ReportMetric(float64(wire)/n/float64(size), "wire/char")
	b.ReportMetric(float64(cpu.Microseconds())/1000/n, "cpu-ms/op")
}

// countingListener counts the bytes its connections write (the server's
// side of the watch).
type countingListener struct {
	net.Listener
	written atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, n: &l.written}, nil
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// cpuTime is this process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
