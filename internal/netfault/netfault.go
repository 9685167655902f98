// Package netfault is a TCP proxy for fault-injection tests: it listens on
// loopback, forwards every connection to a target, and on command cuts the
// connections, stalls the traffic (in one direction or both) or refuses
// new connections. Tests put it between two real endpoints to show what
// they do when the network misbehaves.
package netfault

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// Direction selects the traffic a stall applies to.
type Direction int

// Directions, seen from the client that dialled the proxy.
const (
	// Upstream is client → target.
	Upstream Direction = 1 << iota
	// Downstream is target → client.
	Downstream
	// Both directions.
	Both = Upstream | Downstream
)

// Proxy forwards connections from its own loopback address to a target.
type Proxy struct {
	ln     net.Listener
	target string

	mu       sync.Mutex
	links    map[*link]struct{}
	stalled  Direction
	resumed  chan struct{} // closed when the current stall ends
	refusing bool
	accepted int
	closed   bool
	wg       sync.WaitGroup
	// up and down count the bytes forwarded each way.
	up, down atomic.Int64
}

type link struct {
	client, server net.Conn
	dead           chan struct{} // closed by close
	closeOnce      sync.Once
	halfClosed     int // guarded by Proxy.mu
}

func (l *link) close() {
	l.closeOnce.Do(func() {
		close(l.dead)
		l.client.Close()
		l.server.Close()
	})
}

// Start listens on 127.0.0.1 (any free port) and forwards to target.
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, links: map[*link]struct{}{}, resumed: make(chan struct{})}
	close(p.resumed)
	p.wg.Go(p.acceptLoop)
	return p, nil
}

// Addr is the address clients dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Accepted returns how many connections the proxy has accepted so far.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

// Cut closes every current connection, both sides, as a network failure
// would. New connections are still forwarded.
func (p *Proxy) Cut() {
	p.mu.Lock()
	links := make([]*link, 0, len(p.links))
	for l := range p.links {
		links = append(links, l)
	}
	p.mu.Unlock()
	for _, l := range links {
		l.close()
	}
}

// Stall stops forwarding in the given direction(s): the proxy stops
// reading, so bytes pile up in socket buffers and then senders block.
// Connections stay open. Resume ends the stall.
func (p *Proxy) Stall(d Direction) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stalled == 0 {
		p.resumed = make(chan struct{})
	}
	p.stalled |= d
}

// Resume forwards again in both directions.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stalled != 0 {
		p.stalled = 0
		close(p.resumed)
	}
}

// Refuse makes the proxy close new connections as soon as it accepts them
// (the dial succeeds, then the peer hangs up), or forward them again.
func (p *Proxy) Refuse(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refusing = on
}

// Close stops listening, closes every connection and waits for the
// proxy's goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.Resume()
	p.Cut()
	p.wg.Wait()
	return err
}

func (p *Proxy) acceptLoop() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		p.mu.Lock()
		p.accepted++
		refusing, closed := p.refusing, p.closed
		p.mu.Unlock()
		if refusing || closed {
			client.Close()
			continue
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		l := &link{client: client, server: server, dead: make(chan struct{})}
		p.mu.Lock()
		p.links[l] = struct{}{}
		p.mu.Unlock()
		var pumps sync.WaitGroup
		pumps.Go(func() { p.pump(l, Upstream, server, client) })
		pumps.Go(func() { p.pump(l, Downstream, client, server) })
		p.wg.Go(func() {
			pumps.Wait()
			p.mu.Lock()
			delete(p.links, l)
			p.mu.Unlock()
		})
	}
}

// Forwarded returns how many bytes the proxy passed on (or was passing
// on when the link failed) in direction d (Both: the sum), over every
// connection so far.
func (p *Proxy) Forwarded(d Direction) int64 {
	var n int64
	if d&Upstream != 0 {
		n += p.up.Load()
	}
	if d&Downstream != 0 {
		n += p.down.Load()
	}
	return n
}

// pump copies src to dst, holding still while its direction is stalled.
// End of stream is passed on as a half-close; any other end closes the
// whole link.
func (p *Proxy) pump(l *link, d Direction, dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		if !p.waitUnstalled(l, d) {
			return
		}
		n, err := src.Read(buf)
		if n > 0 {
			if !p.waitUnstalled(l, d) {
				return
			}
			// Counted before the write, so that a reader that got the
			// bytes finds them counted.
			if d == Upstream {
				p.up.Add(int64(n))
			} else {
				p.down.Add(int64(n))
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				l.close()
				return
			}
		}
		if err != nil {
			if cw, ok := dst.(interface{ CloseWrite() error }); ok && errors.Is(err, io.EOF) {
				// The other side sees end of stream after the last byte;
				// the link ends when the other direction ends too.
				cw.CloseWrite()
				if p.otherEnded(l) {
					l.close()
				}
				return
			}
			l.close()
			return
		}
	}
}

// otherEnded counts half-closes: it reports true for the second one.
func (p *Proxy) otherEnded(l *link) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	l.halfClosed++
	return l.halfClosed == 2
}

// waitUnstalled blocks while direction d is stalled; false means the link
// was cut meanwhile.
func (p *Proxy) waitUnstalled(l *link, d Direction) bool {
	for {
		p.mu.Lock()
		stalled, resumed := p.stalled&d != 0, p.resumed
		p.mu.Unlock()
		select {
		case <-l.dead:
			return false
		default:
		}
		if !stalled {
			return true
		}
		select {
		case <-resumed:
		case <-l.dead:
			return false
		}
	}
}
