package rawio

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Descriptors are read and written raw with the semantics of os.File and
// net.Conn that callers rely on: all of a write goes out (across partial
// writes and a full socket buffer), a closed writer reads as io.EOF, a
// closed file as os.ErrClosed, a closed connection as net.ErrClosed, and
// deadlines hold.
func TestRawIO(t *testing.T) {
	t.Run("pipe", func(t *testing.T) {
		r, w := rawPipe(t)
		checkStream(t, New(r), New(w), func() { w.Close() })
		r, _ = rawPipe(t)
		afterClose(t, New(r), r, os.ErrClosed)
	})
	t.Run("unix", func(t *testing.T) {
		server, client := rawSocket(t)
		checkStream(t, New(server), New(client), func() { client.Close() })
		server, _ = rawSocket(t)
		server.SetReadDeadline(time.Now().Add(-time.Second))
		if _, err := New(server).Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read past the deadline: %v, want os.ErrDeadlineExceeded", err)
		}
		server.SetReadDeadline(time.Time{})
		afterClose(t, New(server), server, net.ErrClosed)
	})
	t.Run("blocking", func(t *testing.T) {
		r, _ := rawPipe(t)
		r.Fd() // puts it in blocking mode
		if New(r) != nil {
			t.Fatal("a blocking descriptor is read raw")
		}
	})
}

// afterClose checks that a Read on r, waiting or about to, ends with
// want when c is closed.
func afterClose(t *testing.T, r *Conn, c io.Closer, want error) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := r.Read(make([]byte, 1))
		done <- err
	}()
	c.Close()
	if err := <-done; !errors.Is(err, want) {
		t.Fatalf("read of a closed descriptor: %v, want %v", err, want)
	}
}

func rawPipe(t *testing.T) (r, w *os.File) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	if New(r) == nil || New(w) == nil {
		t.Fatal("a pipe of os.Pipe is not read raw")
	}
	return r, w
}

func rawSocket(t *testing.T) (server, client *net.UnixConn) {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(t.TempDir(), "s"), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if client, err = net.DialUnix("unix", nil, ln.Addr().(*net.UnixAddr)); err != nil {
		t.Fatal(err)
	}
	if server, err = ln.AcceptUnix(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close(); client.Close() })
	if New(server) == nil || New(client) == nil {
		t.Fatal("a unix socket is not read raw")
	}
	return server, client
}

// checkStream writes 4 MiB through w (far more than a pipe or socket
// buffer holds) while r reads it, then closes the writer.
func checkStream(t *testing.T, r io.Reader, w io.Writer, closeWriter func()) {
	t.Helper()
	data := make([]byte, 4<<20)
	for i := range data {
		data[i] = byte(i * 7 / 3)
	}
	werr := make(chan error, 1)
	go func() {
		n, err := w.Write(data)
		if err == nil && n != len(data) {
			err = io.ErrShortWrite
		}
		closeWriter()
		werr <- err
	}()
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if err := <-werr; err != nil {
		t.Fatalf("write: %v", err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("read %d bytes, not the %d written", len(got), len(data))
	}
}

// A socket's errors read as the plain calls' do: a reset connection's
// read names the same operation, addresses and cause, and a write that
// does not wait sends what fits and nothing once the peer is gone.
func TestSocketErrorsKeepTheirShape(t *testing.T) {
	plain, raw := resetPair(t), resetPair(t)
	_, want := plain.Read(make([]byte, 8))
	_, got := New(raw).Read(make([]byte, 8))
	wantText := strings.ReplaceAll(want.Error(), plain.LocalAddr().String(), "LOCAL")
	wantText = strings.ReplaceAll(wantText, plain.RemoteAddr().String(), "REMOTE")
	gotText := strings.ReplaceAll(got.Error(), raw.LocalAddr().String(), "LOCAL")
	gotText = strings.ReplaceAll(gotText, raw.RemoteAddr().String(), "REMOTE")
	if gotText != wantText {
		t.Fatalf("read of a reset connection: %q, want %q (as net.Conn has it)", gotText, wantText)
	}
	var op *net.OpError
	if !errors.As(got, &op) || !errors.Is(got, syscall.ECONNRESET) {
		t.Fatalf("read of a reset connection: %#v, want a *net.OpError matching ECONNRESET", got)
	}
	if n := New(raw).TryWrite([]byte("x")); n != 0 {
		t.Fatalf("TryWrite on a reset connection wrote %d bytes", n)
	}
}

// resetPair returns a TCP connection on loopback whose peer closed it
// with a reset (SO_LINGER 0) after writing nothing.
func resetPair(t *testing.T) *net.TCPConn {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.DialTCP("tcp", nil, ln.Addr().(*net.TCPAddr))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	peer, err := ln.AcceptTCP()
	if err != nil {
		t.Fatal(err)
	}
	peer.SetLinger(0)
	peer.Close()
	return c
}

func TestTryWriteSendsWhatFits(t *testing.T) {
	server, client := rawSocket(t)
	w := New(client)
	if n := w.TryWrite([]byte("hello")); n != 5 {
		t.Fatalf("TryWrite wrote %d of 5 bytes", n)
	}
	big := make([]byte, 64<<20) // more than any socket buffer
	n := w.TryWrite(big)
	if n <= 0 || n >= len(big) {
		t.Fatalf("TryWrite of 64 MiB to an unread socket wrote %d bytes, want some but not all", n)
	}
	if m := w.TryWrite(big); m != 0 {
		t.Fatalf("TryWrite to a full socket wrote %d bytes, want 0", m)
	}
	got := make([]byte, 5)
	if _, err := io.ReadFull(New(server), got); err != nil || string(got) != "hello" {
		t.Fatalf("read %q, %v; want hello", got, err)
	}
}
