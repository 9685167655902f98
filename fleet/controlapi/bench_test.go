package controlapi

import (
	"context"
	"os"
	"testing"
	"time"
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
