package controlapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"example.com/pifleet/fleet/controlapi/internal/answertest"
	"example.com/pifleet/fleet/internal/streamdelta"
)

// lineEvent is a worker event as the fleet holds it (fleet.Event's
// adapter in pifleet-server does the same).
type lineEvent struct{ l *streamdelta.Line }

func (e lineEvent) Raw() json.RawMessage { return e.l.Bytes() }

func (e lineEvent) DeltaAfter(prev WorkerEvent) (json.RawMessage, bool) {
	p, ok := prev.(lineEvent)
	if !ok {
		return nil, false
	}
	return e.l.DeltaAfter(p.l)
}

// answerChanges is an answer of text streamed by instance id in
// 16-character chunks, as the backend's event changes.
func answerChanges(id, text string) []Change {
	var out []Change
	for _, ev := range answertest.Answer(id, text, 16) {
		out = append(out, Change{Kind: ChangeEvent, InstanceID: id, Agent: "gpu-1", Event: ev.Type, Worker: lineEvent{ev.Line}})
	}
	return out
}

// replayBackend gives every watch the same changes, then ends it.
type replayBackend struct {
	*recordingBackend
	changes func() []Change
}

func (b replayBackend) Watch(ctx context.Context) (<-chan Change, error) {
	out := make(chan Change)
	changes := b.changes()
	go func() {
		defer close(out)
		for _, c := range changes {
			select {
			case out <- c:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

// watchAll reads a watch to its end.
func watchAll(t *testing.T, c *Client) []Change {
	t.Helper()
	s, err := c.Watch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var out []Change
	for {
		ch, err := s.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("change %d: %v", len(out)+1, err)
		}
		out = append(out, ch)
	}
}

// rawWatch reads the watch at query to its end over HTTP, as a client of
// its own would: the stream's bytes and its changes' data lines.
func rawWatch(t *testing.T, dir Addr, query string) (total int, data []string) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", dir.Address)
	}}}
	defer hc.CloseIdleConnections()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://x/v1/watch"+query, nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(nil, 1<<30)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			data = append(data, d)
		}
	}
	return len(body), data
}

// interleaved is two answers streamed at once, a worker's whole event
// between them, and an update lost in between (a slow reader's drop).
func interleaved() []Change {
	a := answerChanges("i-a", "<script>alert(1)</script> & \"quotes\" \\ é🚀 \u2028 "+answertest.Text(300))
	b := answerChanges("i-b", answertest.Text(500))
	var out []Change
	for i := range max(len(a), len(b)) {
		if i < len(a) {
			out = append(out, a[i])
		}
		if i == 10 {
			out = append(out, Change{Kind: ChangeEvent, InstanceID: "i-a", Event: "tool_execution_start", Data: json.RawMessage(`{"type":"tool_execution_start","toolName":"<b>x</b>"}`)})
		}
		if i == 20 {
			out = append(out, Change{Kind: ChangeDropped, Count: 1})
			continue // b's update 20 is lost
		}
		if i < len(b) {
			out = append(out, b[i])
		}
	}
	return out
}

// A watcher that asks for deltas (the Client) gets the events byte for
// byte as a watcher that does not: the update after a gap, another
// worker's events or a whole event between, included.
func TestWatchDeltasRebuildEventsByteForByte(t *testing.T) {
	b := replayBackend{newRecordingBackend(), interleaved}
	addr := serve(t, b, DefaultAddr(shortDir(t)))
	deltas := watchAll(t, client(t, addr))
	old := client(t, addr)
	old.wholeWatch = true
	whole := watchAll(t, old)
	if len(deltas) != len(whole) || len(whole) != len(interleaved()) {
		t.Fatalf("%d changes with deltas, %d without; want %d", len(deltas), len(whole), len(interleaved()))
	}
	for i := range whole {
		if !bytes.Equal(deltas[i].Data, whole[i].Data) || deltas[i].Seq != whole[i].Seq || deltas[i].Event != whole[i].Event || deltas[i].InstanceID != whole[i].InstanceID {
			t.Fatalf("change %d with deltas:\n%+v\n%s\nwithout:\n%+v\n%s", i+1, deltas[i], deltas[i].Data, whole[i], whole[i].Data)
		}
	}
	// ... and the whole events are what the worker wrote.
	for i, c := range interleaved() {
		if c.Worker != nil {
			var got, want any
			if json.Unmarshal(whole[i].Data, &got) != nil || json.Unmarshal(c.Worker.Raw(), &want) != nil || fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("change %d = %s, want %s", i+1, whole[i].Data, c.Worker.Raw())
			}
		}
	}
}

// A watcher that does not ask for deltas reads exactly what it read
// before deltas existed: every event whole in data.
func TestWatchWithoutDeltasIsUnchanged(t *testing.T) {
	b := replayBackend{newRecordingBackend(), interleaved}
	addr := serve(t, b, DefaultAddr(shortDir(t)))
	_, data := rawWatch(t, addr, "")
	changes := interleaved()
	if len(data) != len(changes) {
		t.Fatalf("%d changes, want %d", len(data), len(changes))
	}
	for i, c := range changes {
		c.Seq = uint64(i + 1)
		if c.Worker != nil {
			c.Data, c.Worker = c.Worker.Raw(), nil
		}
		want, _ := json.Marshal(c)
		if data[i] != string(want) {
			t.Fatalf("change %d = %s\nwant %s", i+1, data[i], want)
		}
	}
	// With deltas, most updates of the answers went as deltas; the one
	// after the gap went whole.
	_, data = rawWatch(t, addr, "?"+WatchDeltasParam+"=1")
	n, afterGap := 0, false
	for _, d := range data {
		var w wireChange
		if err := json.Unmarshal([]byte(d), &w); err != nil {
			t.Fatal(err)
		}
		if w.Delta != nil {
			n++
		}
		switch {
		case w.Kind == ChangeDropped:
			afterGap = true
		case w.InstanceID == "i-b" && afterGap:
			afterGap = false
			if w.Delta != nil || w.Data == nil {
				t.Errorf("the update after a gap is not whole: %s", d)
			}
		}
	}
	if n < len(data)*3/4 {
		t.Errorf("%d of %d changes are deltas", n, len(data))
	}
}

// An answer of n characters costs a watcher that asks for deltas O(n)
// bytes (the same bytes per character from 2 KB to 200 KB), where one
// that does not pays O(n²).
func TestWatchDeltasCostLinearBytes(t *testing.T) {
	size := 0
	b := replayBackend{newRecordingBackend(), func() []Change { return answerChanges("i-1", answertest.Text(size)) }}
	addr := serve(t, b, DefaultAddr(shortDir(t)))
	perChar := map[int]float64{}
	for _, n := range []int{2_000, 20_000, 200_000} {
		size = n
		got, _ := rawWatch(t, addr, "?"+WatchDeltasParam+"=1")
		perChar[n] = float64(got) / float64(n)
		t.Logf("%d characters: %d bytes with deltas (%.1f per character)", n, got, perChar[n])
	}
	if perChar[200_000] > 1.2*perChar[2_000] || perChar[200_000] > 30 {
		t.Errorf("bytes per character grow with the answer: %v", perChar)
	}
	size = 20_000
	whole, _ := rawWatch(t, addr, "")
	if whole < 50*20_000 {
		t.Errorf("without deltas a 20 KB answer cost %d bytes: the comparison measures nothing", whole)
	}
}

// A reader that omits the events' data gets every change, the events
// without their bytes.
func TestWatchOmitEventData(t *testing.T) {
	b := replayBackend{newRecordingBackend(), interleaved}
	c := client(t, serve(t, b, DefaultAddr(shortDir(t))))
	s, err := c.Watch(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.OmitEventData()
	want := interleaved()
	for i := range want {
		ch, err := s.Next()
		if err != nil {
			t.Fatalf("change %d: %v", i+1, err)
		}
		if ch.Kind != want[i].Kind || ch.Event != want[i].Event || ch.Kind == ChangeEvent && ch.Data != nil {
			t.Fatalf("change %d = %+v %s, want %+v without data", i+1, ch, ch.Data, want[i])
		}
	}
	if _, err := s.Next(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last change: %v", err)
	}
}
