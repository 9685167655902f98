package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// Gate decides from the peer's address alone whether it may talk to us at
// all: the identity lookup (whois) and trust check of the accept path. It
// runs before a single byte is sent; an error closes the socket silently.
// Errors should wrap ErrDenied when the peer is refused (rather than the
// lookup failing).
type Gate func(ctx context.Context, remote netip.AddrPort) error

// RemoteAddrPort returns the peer's address of nc with an IPv4-mapped IPv6
// address unmapped (the reference strips "::ffff:"), or the zero AddrPort
// when nc is not IP (net.Pipe).
func RemoteAddrPort(nc net.Conn) netip.AddrPort {
	var ap netip.AddrPort
	switch a := nc.RemoteAddr().(type) {
	case *net.TCPAddr:
		ap = a.AddrPort()
	default:
		ap, _ = netip.ParseAddrPort(a.String())
	}
	return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
}

// Admit runs gate on nc's remote address and starts a Conn when it
// passes. When it fails, nc is closed without anything written to it and
// the error says why. A nil gate admits everyone.
func Admit(ctx context.Context, nc net.Conn, gate Gate, opts Options) (*Conn, error) {
	if gate != nil {
		remote := RemoteAddrPort(nc)
		if err := gate(ctx, remote); err != nil {
			nc.Close()
			return nil, fmt.Errorf("transport: peer %s refused: %w", remote, err)
		}
	}
	return NewConn(nc, opts), nil
}

// DefaultGateTimeout bounds one Gate call in Server.
const DefaultGateTimeout = 10 * time.Second

// Server accepts connections, gates each one and hands the admitted ones
// to Handle.
type Server struct {
	// Gate runs before any byte is sent; nil admits everyone.
	Gate Gate
	// GateTimeout bounds one gate call (default 10 s): a whois that hangs
	// must not hold a socket forever.
	GateTimeout time.Duration
	// Options configure each admitted connection.
	Options Options
	// Handle receives each admitted connection, on a goroutine of its own;
	// it owns the connection from then on. Required.
	Handle func(*Conn)
	// Logger receives refusals and accept errors (default: disabled).
	Logger zerolog.Logger
}

// Serve accepts on ln until ctx is done (it then closes ln and returns
// nil) or ln fails for good. Connections already handed to Handle are not
// closed by Serve.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if s.Handle == nil {
		return errors.New("transport: Server.Handle is nil")
	}
	gateTimeout := s.GateTimeout
	if gateTimeout <= 0 {
		gateTimeout = DefaultGateTimeout
	}
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()

	var wg sync.WaitGroup
	defer wg.Wait() // gates in flight finish (bounded by gateTimeout)
	pause := 5 * time.Millisecond
	for {
		nc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// Out of file descriptors and the like: wait a little and go on.
			s.Logger.Warn().Err(err).Dur("pause", pause).Msg("accept failed")
			t := time.NewTimer(pause)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil
			}
			pause = min(2*pause, time.Second)
			continue
		}
		pause = 5 * time.Millisecond
		wg.Go(func() {
			gctx, cancel := context.WithTimeout(ctx, gateTimeout)
			c, err := Admit(gctx, nc, s.Gate, s.Options)
			cancel()
			if err != nil {
				s.Logger.Warn().Err(err).Msg("connection refused")
				return
			}
			go s.Handle(c) // not part of wg: Serve does not wait for handlers
		})
	}
}
