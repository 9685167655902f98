package netfault

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// failsafe bounds every wait; reaching it fails the test.
const failsafe = 10 * time.Second

// echoServer echoes every connection until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	return ln.Addr().String()
}

func start(t *testing.T) *Proxy {
	t.Helper()
	p, err := Start(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func dial(t *testing.T, p *Proxy) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func roundTrip(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	if _, err := io.WriteString(c, msg); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(failsafe))
	buf := make([]byte, len(msg))
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatalf("echo of %q: %v", msg, err)
	}
	if string(buf) != msg {
		t.Fatalf("echo %q, want %q", buf, msg)
	}
}

func TestForwards(t *testing.T) {
	p := start(t)
	c := dial(t, p)
	roundTrip(t, c, "hello")
	roundTrip(t, c, "again")
	if n := p.Accepted(); n != 1 {
		t.Errorf("Accepted() = %d, want 1", n)
	}
	// The echo was read back, so both directions passed all ten bytes.
	if up, down, both := p.Forwarded(Upstream), p.Forwarded(Downstream), p.Forwarded(Both); up != 10 || down != 10 || both != 20 {
		t.Errorf("Forwarded = %d up, %d down, %d both; want 10, 10, 20", up, down, both)
	}
}

func TestCutEndsConnectionsButNotTheProxy(t *testing.T) {
	p := start(t)
	c := dial(t, p)
	roundTrip(t, c, "x")
	p.Cut()
	c.SetReadDeadline(time.Now().Add(failsafe))
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read after Cut: %v, want end of stream or reset", err)
	}
	roundTrip(t, dial(t, p), "new connections still work")
}

func TestStallHoldsBytesUntilResume(t *testing.T) {
	p := start(t)
	c := dial(t, p)
	roundTrip(t, c, "before")
	p.Stall(Both)
	if _, err := io.WriteString(c, "held"); err != nil {
		t.Fatal(err)
	}
	// Nothing may come back while stalled; the short deadline bounds how
	// long we look, it is not waiting for an event.
	c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, err := c.Read(make([]byte, 4)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read during stall: %d bytes, %v; want nothing", n, err)
	}
	p.Resume()
	c.SetReadDeadline(time.Now().Add(failsafe))
	buf := make([]byte, 4)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "held" {
		t.Fatalf("after Resume: %q, %v", buf, err)
	}
}

func TestStallOneDirection(t *testing.T) {
	p := start(t)
	c := dial(t, p)
	p.Stall(Downstream) // the echo comes back through downstream
	io.WriteString(c, "up")
	c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := c.Read(make([]byte, 2)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("downstream is stalled, yet read: %v", err)
	}
	p.Resume()
	c.SetReadDeadline(time.Now().Add(failsafe))
	buf := make([]byte, 2)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "up" {
		t.Fatalf("after Resume: %q, %v", buf, err)
	}
}

func TestCutWhileStalled(t *testing.T) {
	p := start(t)
	c := dial(t, p)
	roundTrip(t, c, "x")
	p.Stall(Both)
	p.Cut()
	c.SetReadDeadline(time.Now().Add(failsafe))
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read after Cut during a stall: %v, want end of stream or reset", err)
	}
}

func TestRefuse(t *testing.T) {
	p := start(t)
	p.Refuse(true)
	c := dial(t, p)
	c.SetReadDeadline(time.Now().Add(failsafe))
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read on a refused connection: %v, want end of stream", err)
	}
	p.Refuse(false)
	roundTrip(t, dial(t, p), "ok")
}

func TestHalfCloseIsPassedOn(t *testing.T) {
	p := start(t)
	c := dial(t, p)
	io.WriteString(c, "last words")
	c.(*net.TCPConn).CloseWrite()
	c.SetReadDeadline(time.Now().Add(failsafe))
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "last words" {
		t.Fatalf("after half-close read %q, %v; want the echo then end of stream", got, err)
	}
}
