package transport

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"sync"
	"testing"
)

// benchEvent is a typical ~300-byte event frame: one streamed token of a
// worker, as the agent forwards thousands of them per second.
var benchEvent = &EventFrame{
	InstanceID: "i-0123456789ab",
	Event: json.RawMessage(`{"type":"message_update","assistantMessageEvent":{"type":"text_delta",` +
		`"contentIndex":0,"delta":"Refactor the handler so that it returns early when the context is done."},` +
		`"message":{"role":"assistant","api":"anthropic-messages","timestamp":1730000000123}}`),
}

// cyclicReader serves a prebuilt stream over and over, in reads of at most
// chunk bytes, like a socket delivering 64 KiB at a time.
type cyclicReader struct {
	data  []byte
	off   int
	chunk int
}

func (r *cyclicReader) Read(p []byte) (int, error) {
	if r.off == len(r.data) {
		r.off = 0
	}
	n := copy(p[:min(len(p), r.chunk)], r.data[r.off:])
	r.off += n
	return n, nil
}

func eventStream(b *testing.B) (stream []byte, frameLen int) {
	one, err := MarshalFrame(benchEvent)
	if err != nil {
		b.Fatal(err)
	}
	for range 4096 {
		stream = append(stream, one...)
	}
	return stream, len(one)
}

func reportFrames(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "frames/s")
}

// BenchmarkDecodeEvents decodes a stream of ~300-byte event frames fed in
// 64 KiB chunks; one op is one frame.
//
//   - validated: Decode, every check of reference 1.3 and a typed *EventFrame;
//   - framing-only: ReadRecord, LF splitting and the size limit, no parsing;
//   - encoding-json: ReadRecord + json.Unmarshal into an equivalent struct,
//     without any schema check, for comparison.
func BenchmarkDecodeEvents(b *testing.B) {
	stream, frameLen := eventStream(b)
	b.Run("validated", func(b *testing.B) {
		d := NewDecoder(&cyclicReader{data: stream, chunk: 64 << 10})
		b.SetBytes(int64(frameLen))
		b.ReportAllocs()
		for b.Loop() {
			f, err := d.Decode()
			if err != nil {
				b.Fatal(err)
			}
			if len(f.(*EventFrame).Event) == 0 {
				b.Fatal("empty event")
			}
		}
		reportFrames(b)
	})
	b.Run("framing-only", func(b *testing.B) {
		d := NewDecoder(&cyclicReader{data: stream, chunk: 64 << 10})
		b.SetBytes(int64(frameLen))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := d.ReadRecord(); err != nil {
				b.Fatal(err)
			}
		}
		reportFrames(b)
	})
	b.Run("encoding-json", func(b *testing.B) {
		type jsonEvent struct {
			V          float64         `json:"v"`
			Type       string          `json:"type"`
			ID         string          `json:"id,omitempty"`
			TraceID    string          `json:"traceId,omitempty"`
			InstanceID string          `json:"instanceId"`
			Event      json.RawMessage `json:"event"`
		}
		d := NewDecoder(&cyclicReader{data: stream, chunk: 64 << 10})
		b.SetBytes(int64(frameLen))
		b.ReportAllocs()
		for b.Loop() {
			rec, err := d.ReadRecord()
			if err != nil {
				b.Fatal(err)
			}
			var ev jsonEvent
			if err := json.Unmarshal(rec, &ev); err != nil {
				b.Fatal(err)
			}
		}
		reportFrames(b)
	})
}

// BenchmarkEncodeEvents encodes ~300-byte event frames into 64 KiB write
// batches; one op is one frame.
func BenchmarkEncodeEvents(b *testing.B) {
	one, err := MarshalFrame(benchEvent)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("AppendFrame", func(b *testing.B) {
		buf := make([]byte, 0, 64<<10)
		b.SetBytes(int64(len(one)))
		b.ReportAllocs()
		for b.Loop() {
			if buf, err = AppendFrame(buf, benchEvent); err != nil {
				b.Fatal(err)
			}
			if len(buf) > 60<<10 {
				io.Discard.Write(buf)
				buf = buf[:0]
			}
		}
		reportFrames(b)
	})
	b.Run("encoding-json", func(b *testing.B) {
		type jsonEvent struct {
			V          int             `json:"v"`
			Type       string          `json:"type"`
			InstanceID string          `json:"instanceId"`
			Event      json.RawMessage `json:"event"`
		}
		buf := make([]byte, 0, 64<<10)
		b.SetBytes(int64(len(one)))
		b.ReportAllocs()
		for b.Loop() {
			out, err := json.Marshal(jsonEvent{V: 1, Type: "event", InstanceID: benchEvent.InstanceID, Event: benchEvent.Event})
			if err != nil {
				b.Fatal(err)
			}
			buf = append(append(buf, out...), '\n')
			if len(buf) > 60<<10 {
				io.Discard.Write(buf)
				buf = buf[:0]
			}
		}
		reportFrames(b)
	})
}

// benchTCPPair returns two Conns joined by loopback TCP.
func benchTCPPair(b *testing.B, near, far Options) (*Conn, *Conn) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		nc, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- nc
	}()
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	fc, ok := <-accepted
	if !ok {
		b.Fatal("accept failed")
	}
	n, f := NewConn(nc, near), NewConn(fc, far)
	b.Cleanup(func() { n.Close(); f.Close() })
	return n, f
}

// BenchmarkConnEventThroughput sends ~300-byte event frames from one Conn
// to another over loopback TCP; one op is one frame handed to the
// receiving handler.
func BenchmarkConnEventThroughput(b *testing.B) {
	received := make(chan struct{}, 1)
	var count, target int
	var mu sync.Mutex
	sender, _ := benchTCPPair(b, Options{}, Options{Handler: func(Frame) {
		mu.Lock()
		count++
		if count == target {
			received <- struct{}{}
		}
		mu.Unlock()
	}})
	one, _ := MarshalFrame(benchEvent)
	b.SetBytes(int64(len(one)))
	b.ReportAllocs()
	mu.Lock()
	target = b.N
	mu.Unlock()
	b.ResetTimer()
	for range b.N {
		if err := sender.Send(context.Background(), benchEvent); err != nil {
			b.Fatal(err)
		}
	}
	<-received
	reportFrames(b)
}

// BenchmarkConnRequestRoundTrip measures one request/response exchange
// over loopback TCP (TCP_NODELAY on both ends); one op is one round trip.
func BenchmarkConnRequestRoundTrip(b *testing.B) {
	near, far := benchTCPPair(b, Options{}, Options{})
	far.SetHandler(func(f Frame) {
		if s, ok := f.(*StopFrame); ok {
			far.Send(context.Background(), &StoppedFrame{Header: Header{ID: s.ID}, InstanceID: s.InstanceID})
		}
	})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := near.Request(context.Background(), &StopFrame{InstanceID: "i-0123456789ab"}); err != nil {
			b.Fatal(err)
		}
	}
}
