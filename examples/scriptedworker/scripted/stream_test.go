package scripted

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// streamLines runs one prompt through Main over pipes and returns its
// stdout lines up to agent_end.
func streamLines(t testing.TB, prompt string) [][]byte {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("HOME", dir)
	t.Setenv("PI_CODING_AGENT_DIR", dir)
	inR, inW := io.Pipe()
	outR, outW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	exited := make(chan int, 1)
	go func() {
		exited <- Main([]string{"--mode", "rpc", "--session-dir", filepath.Join(dir, "sessions")}, inR, outW, io.Discard)
		outW.Close()
	}()
	defer func() {
		inW.Close()
		<-exited
		outR.Close()
	}()
	line, err := json.Marshal(map[string]string{"type": "prompt", "message": prompt})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inW.Write(append(line, '\n')); err != nil {
		t.Fatal(err)
	}
	out := bufio.NewReaderSize(outR, 1<<20)
	var lines [][]byte
	for {
		l, err := out.ReadBytes('\n')
		if err != nil {
			t.Fatalf("after %d lines: %v", len(lines), err)
		}
		lines = append(lines, bytes.TrimSuffix(l, []byte("\n")))
		if bytes.HasPrefix(l, []byte(`{"type":"agent_end"`)) {
			return lines
		}
	}
}

// The partial message of every message_update, encoded a chunk at a time
// as the answer grows, is byte for byte what encoding the whole message
// writes, in both of the places the event carries it, and its texts are
// the deltas so far: characters that JSON escapes, and runes of several
// bytes, split across chunks included.
func TestStreamedPartialIsTheWholeMessageEncoded(t *testing.T) {
	t.Setenv("PIFLEET_FAUX_CHUNK", "3")
	thinking := `weigh <a> & "b" ` + "\u2028 é\tü\\ 日本語 \x01"
	text := "line one\bline <two> & \u2029 \"three\" ✓ end"
	lines := streamLines(t, "think: "+thinking+"\nsay: "+text)
	sofar := map[int]string{}
	updates := 0
	for _, l := range lines {
		var ev struct {
			Type  string
			Event struct {
				Type         string
				ContentIndex int
				Delta        string
				Partial      json.RawMessage
			} `json:"assistantMessageEvent"`
			Message json.RawMessage
		}
		if err := json.Unmarshal(l, &ev); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		if ev.Type != "message_update" {
			continue
		}
		updates++
		if !bytes.Equal(ev.Message, ev.Event.Partial) {
			t.Fatalf("message and partial differ:\n%s\n%s", ev.Message, ev.Event.Partial)
		}
		var m message
		if err := json.Unmarshal(ev.Message, &m); err != nil {
			t.Fatal(err)
		}
		whole, err := appendJSON(nil, &m)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(whole, ev.Message) {
			t.Fatalf("partial message\n%s\nencoded whole is\n%s", ev.Message, whole)
		}
		if strings.HasSuffix(ev.Event.Type, "_delta") {
			sofar[ev.Event.ContentIndex] += ev.Event.Delta
			p := m.Content[ev.Event.ContentIndex]
			got := p.Text
			if got == nil {
				got = p.Thinking
			}
			if got == nil || *got != sofar[ev.Event.ContentIndex] {
				t.Fatalf("part %d holds %v, the deltas so far are %q", ev.Event.ContentIndex, got, sofar[ev.Event.ContentIndex])
			}
		}
	}
	if sofar[0] != strings.ToValidUTF8(thinking, "\uFFFD") || sofar[1] != text {
		t.Errorf("streamed thinking %q and text %q", sofar[0], sofar[1])
	}
	if updates < 20 {
		t.Errorf("%d updates: the answer was not streamed in chunks", updates)
	}
}

// BenchmarkStreamedAnswer measures the worker alone streaming one answer
// of 20,000 characters in 16-character chunks (1,252 message_update
// lines, each with the partial message twice) into a pipe.
func BenchmarkStreamedAnswer(b *testing.B) {
	text := strings.Repeat("0123456789abcdef", 20_000/16)
	updates := 0
	for b.Loop() {
		for _, l := range streamLines(b, "say: "+text) {
			if bytes.HasPrefix(l, []byte(`{"type":"message_update"`)) {
				updates++
			}
		}
	}
	b.ReportMetric(float64(updates)/b.Elapsed().Seconds(), "updates/s")
}
