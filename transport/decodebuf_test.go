package transport

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
)

// sizedReader hands out its data in the sizes given, then io.EOF.
type sizedReader struct {
	data  []byte
	sizes []int
}

func (r *sizedReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := len(r.data)
	if len(r.sizes) > 0 {
		n = min(n, r.sizes[0])
	}
	n = copy(p, r.data[:n])
	r.data = r.data[n:]
	if len(r.sizes) > 0 {
		if r.sizes[0] -= n; r.sizes[0] == 0 {
			r.sizes = r.sizes[1:]
		}
	}
	return n, nil
}

// Issue #20: an idle connection's decoder holds its small buffer only. It
// takes a large one while its stream flows and hands it back once the
// stream trickles again; records are intact across every switch.
func TestDecoderBuffersFollowTheStream(t *testing.T) {
	var stream bytes.Buffer
	var want []string
	add := func(rec string) {
		want = append(want, rec)
		stream.WriteString(rec + "\n")
	}
	hb := `{"v":1,"type":"heartbeat"}`
	for range 3 {
		add(hb)
	}
	trickle := stream.Len()
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 300 { // a flowing stream: records of every size
		add(fmt.Sprintf(`{"v":1,"type":"event","instanceId":"i-%d","event":{"pad":"%s"}}`, i, bytes.Repeat([]byte("x"), rng.IntN(3*readChunk))))
	}
	flowing := stream.Len()
	for range 3 {
		add(hb)
	}
	// Reads as a socket gives them: the heartbeats one by one, the flow in
	// pieces of every size.
	sizes := []int{len(hb) + 1, len(hb) + 1, len(hb) + 1}
	for left := flowing - trickle; left > 0; {
		n := min(left, 1+rng.IntN(2*readChunk))
		sizes = append(sizes, n)
		left -= n
	}
	sizes = append(sizes, len(hb)+1, len(hb)+1, len(hb)+1)
	d := NewDecoder(&sizedReader{data: stream.Bytes(), sizes: sizes})
	for i, w := range want {
		rec, err := d.ReadRecord()
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if string(rec) != w {
			t.Fatalf("record %d: %d bytes, want %d", i, len(rec), len(w))
		}
		if i < 3 && len(d.buf) != idleChunk {
			t.Fatalf("heartbeat %d read into a %d-byte buffer, want the small one", i, len(d.buf))
		}
	}
	// The read that waits for more (here it meets the end) uses the small
	// buffer: the large one went back to the pool.
	if _, err := d.ReadRecord(); err != io.EOF {
		t.Fatalf("at the end: %v", err)
	}
	if len(d.buf) != idleChunk || d.pooled != nil {
		t.Fatalf("after the stream trickled again: a %d-byte buffer (pooled %v), want the small one", len(d.buf), d.pooled != nil)
	}
}
