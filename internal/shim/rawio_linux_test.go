package shim

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The relay's descriptors are read and written raw, with the semantics
// of os.File and net.Conn that the shim relies on: all of a write goes
// out (across partial writes and a full socket buffer), a closed writer
// reads as io.EOF, a closed file as os.ErrClosed, a closed connection as
// net.ErrClosed, and deadlines hold.
func TestRawIO(t *testing.T) {
	t.Run("pipe", func(t *testing.T) {
		r, w := rawPipe(t)
		checkStream(t, newRawIO(r), newRawIO(w), func() { w.Close() })
		r, _ = rawPipe(t)
		afterClose(t, newRawIO(r), r, os.ErrClosed)
	})
	t.Run("unix", func(t *testing.T) {
		server, client := rawSocket(t)
		checkStream(t, newRawIO(server), newRawIO(client), func() { client.Close() })
		server, _ = rawSocket(t)
		server.SetReadDeadline(time.Now().Add(-time.Second))
		if _, err := newRawIO(server).Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read past the deadline: %v, want os.ErrDeadlineExceeded", err)
		}
		server.SetReadDeadline(time.Time{})
		afterClose(t, newRawIO(server), server, net.ErrClosed)
	})
	t.Run("blocking", func(t *testing.T) {
		r, _ := rawPipe(t)
		r.Fd() // puts it in blocking mode
		if newRawIO(r) != nil {
			t.Fatal("a blocking descriptor is read raw")
		}
	})
}

// afterClose checks that a Read on r, waiting or about to, ends with
// want when c is closed.
func afterClose(t *testing.T, r *rawIO, c io.Closer, want error) {
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
	if newRawIO(r) == nil || newRawIO(w) == nil {
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
	if newRawIO(server) == nil || newRawIO(client) == nil {
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
