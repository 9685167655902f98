package transport

import (
	"bufio"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Connections sharing one Heartbeats each send a heartbeat every
// interval, and each still detects its own dead peer: one that sends
// nothing expires, one that stops reading stalls. When the last one
// closes, the shared goroutine ends (synctest.Test fails on a goroutine
// left behind).
func TestHeartbeatsSharedByConnectionsKeepEachOnesRules(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		beats := NewHeartbeats()
		start := time.Now()
		type side struct {
			conn   *Conn
			peer   net.Conn
			sent   []time.Duration // heartbeats the peer read
			closed time.Duration
		}
		open := func(opts Options, read, answer bool) *side {
			a, b := net.Pipe()
			opts.Heartbeats = beats
			s := &side{conn: NewConn(a, opts), peer: b}
			go func() {
				<-s.conn.Done()
				s.closed = time.Since(start)
			}()
			if read {
				go func() {
					d := NewDecoder(b)
					for {
						f, err := d.Decode()
						if err != nil {
							return
						}
						if f.FrameType() == TypeHeartbeat {
							s.sent = append(s.sent, time.Since(start))
						}
					}
				}()
			}
			if answer {
				go func() {
					enc := NewEncoder(b)
					for range 6 {
						time.Sleep(10 * time.Second)
						if enc.Encode(&HeartbeatFrame{}) != nil {
							return
						}
					}
				}()
			}
			return s
		}
		live := open(Options{}, true, true)
		silent := open(Options{ExpiryTimeout: 40 * time.Second}, true, false)
		deaf := open(Options{ExpiryTimeout: time.Hour, StallTimeout: 20 * time.Second}, false, false)

		time.Sleep(61 * time.Second)
		synctest.Wait()

		if live.conn.Err() != nil {
			t.Errorf("live connection closed: %v", live.conn.Err())
		}
		if want := []time.Duration{15 * time.Second, 30 * time.Second, 45 * time.Second, 60 * time.Second}; !cmp.Equal(live.sent, want) {
			t.Errorf("live peer read heartbeats at %v, want %v", live.sent, want)
		}
		if want := []time.Duration{15 * time.Second, 30 * time.Second}; !cmp.Equal(silent.sent, want) {
			t.Errorf("silent peer read heartbeats at %v, want %v", silent.sent, want)
		}
		if !errors.Is(silent.conn.Err(), ReasonExpired) || silent.closed != 40*time.Second {
			t.Errorf("silent peer: closed at %v with %v, want expired at 40s", silent.closed, silent.conn.Err())
		}
		// The heartbeat at 15 s blocks the writer; 20 s later it stalls.
		if !errors.Is(deaf.conn.Err(), ReasonStalled) || deaf.closed != 35*time.Second {
			t.Errorf("deaf peer: closed at %v with %v, want stalled at 35s", deaf.closed, deaf.conn.Err())
		}
		live.conn.Close()
		for _, s := range []*side{live, silent, deaf} {
			s.peer.Close()
		}
		synctest.Wait()
		beats.mu.Lock()
		defer beats.mu.Unlock()
		if len(beats.rounds) != 0 {
			t.Errorf("%d heartbeat rounds left after every connection closed", len(beats.rounds))
		}
	})
}

// round runs one round of beats' heartbeats at interval every, now.
func round(t *testing.T, beats *Heartbeats, every time.Duration) {
	t.Helper()
	beats.mu.Lock()
	r := beats.rounds[every]
	beats.mu.Unlock()
	if r == nil {
		t.Fatalf("no round of %v", every)
	}
	beats.beat(r, nil)
}

// On a socket, an idle connection's heartbeat is written by the round
// itself: the writer is not woken.
func TestHeartbeatOfAnIdleSocketIsWrittenByTheRound(t *testing.T) {
	client, server := tcpPair(t)
	if rawSocket(client) == nil {
		t.Skip("no raw socket writes on this system: heartbeats go through the writer")
	}
	beats := NewHeartbeats()
	c := NewConn(client, Options{Heartbeats: beats, HeartbeatInterval: time.Hour})
	defer c.Close()
	round(t, beats, time.Hour)
	line, err := bufio.NewReader(server).ReadString('\n')
	if err != nil || line != string(heartbeatLine) {
		t.Fatalf("peer read %q, %v; want a heartbeat", line, err)
	}
	if n := c.handedOff.Load(); n != 0 {
		t.Errorf("%d heartbeats handed to the writer, want 0", n)
	}
}

// When the socket buffer is full, the round hands the heartbeat to the
// writer, which sends it once the peer reads again: nothing is lost and
// the round never waits.
func TestHeartbeatOnAFullSocketGoesThroughTheWriter(t *testing.T) {
	client, server := tcpPair(t)
	_ = client.(*net.TCPConn).SetWriteBuffer(4096)
	_ = server.(*net.TCPConn).SetReadBuffer(4096)
	raw := rawSocket(client)
	if raw == nil {
		t.Skip("no raw socket writes on this system: heartbeats go through the writer")
	}
	filler := make([]byte, 1024)
	filled := 0
	for {
		n := raw.TryWrite(filler)
		if n == 0 {
			break
		}
		filled += n
	}
	beats := NewHeartbeats()
	c := NewConn(client, Options{Heartbeats: beats, HeartbeatInterval: time.Hour})
	defer c.Close()
	round(t, beats, time.Hour)
	if n := c.handedOff.Load(); n != 1 {
		t.Fatalf("%d heartbeats handed to the writer, want 1", n)
	}
	r := bufio.NewReader(server)
	if _, err := io.CopyN(io.Discard, r, int64(filled)); err != nil {
		t.Fatal(err)
	}
	line, err := r.ReadString('\n')
	if err != nil || line != string(heartbeatLine) {
		t.Fatalf("after the filler the peer read %q, %v; want a heartbeat", line, err)
	}
}

// A connection that writes other frames sends no heartbeats (any byte
// re-arms the peer's expiry); once it falls quiet they resume, and the
// peer never goes more than one and a half intervals without a byte.
func TestHeartbeatsSkipAConnectionThatWrote(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const every = 10 * time.Second
		a, b := net.Pipe()
		start := time.Now()
		c := NewConn(a, Options{Heartbeats: NewHeartbeats(), HeartbeatInterval: every, ExpiryTimeout: time.Hour})
		type arrival struct {
			at   time.Duration
			beat bool
		}
		var got []arrival
		read := make(chan struct{})
		go func() {
			defer close(read)
			d := NewDecoder(b)
			for {
				f, err := d.Decode()
				if err != nil {
					return
				}
				got = append(got, arrival{time.Since(start), f.FrameType() == TypeHeartbeat})
			}
		}()
		// Busy for a minute: a frame every 4 s (at 3, 7, … 59 s), less
		// than half an interval before each round. Then silence, but for
		// one frame at 127 s, 3 s before a round.
		time.Sleep(3 * time.Second)
		for i := range 15 {
			if i > 0 {
				time.Sleep(4 * time.Second)
			}
			if err := c.TrySend(&ErrorFrame{Code: "busy", Message: "x"}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(68 * time.Second) // to 127 s
		if err := c.TrySend(&ErrorFrame{Code: "late", Message: "x"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(34 * time.Second) // to 161 s
		synctest.Wait()
		c.Close()
		b.Close()
		<-read

		var beats []time.Duration
		last := time.Duration(0)
		for _, a := range got {
			if a.beat {
				beats = append(beats, a.at)
			}
			if gap := a.at - last; gap > every*3/2 {
				t.Errorf("the peer read nothing for %v (until %v), more than one and a half intervals", gap, a.at)
			}
			last = a.at
		}
		// Rounds at 10, 20, … s: skipped while busy (to 60 s) and at
		// 130 s (the frame at 127 s), beating otherwise.
		want := []time.Duration{70 * time.Second, 80 * time.Second, 90 * time.Second, 100 * time.Second,
			110 * time.Second, 120 * time.Second, 140 * time.Second, 150 * time.Second, 160 * time.Second}
		if !cmp.Equal(beats, want) {
			t.Errorf("heartbeats read at %v, want %v", beats, want)
		}
	})
}

// The heartbeat line as it is written is decoded without the parser, to
// the frame the parser makes of it; any other spelling of a heartbeat
// (CRLF, spaces, another order, an id) still goes through the parser.
func TestHeartbeatLineDecodesAsTheParserWould(t *testing.T) {
	parsed, err := ParseFrame(heartbeatRecord)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		string(heartbeatLine),
		`{"v":1,"type":"heartbeat"}` + "\r\n",
		`{"type":"heartbeat","v":1}` + "\n",
		`{ "v": 1, "type": "heartbeat" }` + "\n",
	} {
		f, err := NewDecoder(strings.NewReader(line)).Decode()
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if !cmp.Equal(f, parsed) {
			t.Errorf("%q decoded to %#v, want %#v", line, f, parsed)
		}
	}
	// Not a heartbeat line: a near miss is parsed (and refused).
	if _, err := NewDecoder(strings.NewReader(`{"v":2,"type":"heartbeat"}` + "\n")).Decode(); err == nil {
		t.Error(`{"v":2,"type":"heartbeat"} decoded`)
	}
}
