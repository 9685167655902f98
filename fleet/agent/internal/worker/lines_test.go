package worker

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"example.com/pifleet/transport/pirpc"
)

// parseBothWays parses lines with a lineParser and with ParseRecord, and
// fails on the first line they read differently. It returns how many
// lines the parser took from the last one's record without a parse.
func parseBothWays(t testing.TB, lines [][]byte) (grown int) {
	t.Helper()
	var p lineParser
	for i, l := range lines {
		if p.growing {
			if _, ok := p.grow.Next(l); ok {
				grown++
			}
		}
		got, gerr := p.parse(l)
		want, werr := pirpc.ParseRecord(l)
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gerr, werr) {
			t.Fatalf("line %d read differently without a parse:\n got %+v %+v, err %v\nwant %+v %+v, err %v\nline: %q",
				i, got.Event, updateOf(got), gerr, want.Event, updateOf(want), werr, l)
		}
	}
	return grown
}

func updateOf(r pirpc.Record) *pirpc.AssistantMessageEvent {
	if r.Event == nil {
		return nil
	}
	return r.Event.Update
}

// piLines writes pi's lines for one assistant message as pi lays them out
// (members in pi's order, the partial message twice).
type piLines struct {
	content []map[string]string // the blocks: "type" and its text member
	output  int                 // usage.output
	lines   [][]byte
}

// block is a content block of kind ("text" or "thinking"), its text under
// the member of that name.
func (s *piLines) block(kind string) {
	s.content = append(s.content, map[string]string{"type": kind, kind: ""})
}

// quoted is v in JSON, as pi writes it (no HTML escapes).
func quoted(v string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func (s *piLines) partial() string {
	var b strings.Builder
	b.WriteString(`{"role":"assistant","content":[`)
	for i, c := range s.content {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"type":` + quoted(c["type"]) + `,` + quoted(c["type"]) + `:` + quoted(c[c["type"]]) + `}`)
	}
	b.WriteString(`],"api":"pifleet-faux","provider":"faux","model":"faux-1","usage":{"input":0,"output":`)
	b.WriteString(strings.Repeat("1", s.output%3+1))
	b.WriteString(`,"totalTokens":0},"stopReason":"stop","timestamp":1795979568094}`)
	return b.String()
}

// update writes a message_update whose step is the members given (JSON,
// without braces), the partial message after them.
func (s *piLines) update(step string) {
	p := s.partial()
	if step != "" {
		step += ","
	}
	s.lines = append(s.lines, []byte(`{"type":"message_update","assistantMessageEvent":{`+step+`"partial":`+p+`},"message":`+p+`}`))
}

// grow streams text into block i in chunks of n bytes (n < 0: -n runes);
// edit, when not nil, may change chunk j's step members (JSON, where $
// stands for the delta), the stream, or the delta it says.
func (s *piLines) grow(i int, text string, n int, edit func(j int, step *string, delta *string)) {
	kind := s.content[i]["type"]
	s.update(`"type":"` + kind + `_start","contentIndex":` + itoa(i))
	for j, chunk := range chunksOf(text, n) {
		s.content[i][kind] += chunk
		delta := chunk
		step := `"type":"` + kind + `_delta","contentIndex":` + itoa(i) + `,"delta":$`
		if edit != nil {
			edit(j, &step, &delta)
		}
		s.update(strings.Replace(step, "$", quoted(delta), 1))
	}
	s.update(`"type":"` + kind + `_end","contentIndex":` + itoa(i) + `,"content":` + quoted(s.content[i][kind]))
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

func chunksOf(text string, n int) []string {
	var out []string
	for len(text) > 0 {
		k := n
		if n < 0 {
			k = 0
			for r := 0; r < -n && k < len(text); r++ {
				_, size := utf8.DecodeRuneInString(text[k:])
				k += size
			}
		}
		k = min(max(k, 1), len(text))
		out = append(out, text[:k])
		text = text[k:]
	}
	return out
}

// textStream is one text block of text, in chunks of n.
func textStream(text string, n int, edit func(j int, step *string, delta *string)) [][]byte {
	var s piLines
	s.block("text")
	s.grow(0, text, n, edit)
	return s.lines
}

const tricky = "plain, \"quoted\", back\\slash, tab\t newline\n ctrl\x01 <html>&amp; é 🚀 line\u2028sep bad\xed\xa0\xbd\xff utf-8 "

func recordedPi(t testing.TB) [][]byte {
	f, err := os.Open("../../../../transport/pirpc/testdata/pi-0.73.1-transcript.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines = append(lines, bytes.Clone(sc.Bytes()))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return lines
}

// AC: the usual message_update (the last one with one more chunk) is read
// without a parse, and every line reads as ParseRecord reads it: pi's
// recorded stream, texts with escapes and multibyte UTF-8 cut anywhere,
// deltas that are not what the text grew by, lines that change elsewhere,
// a step that names its delta twice, broken lines.
func TestLineParserReadsAsParseRecord(t *testing.T) {
	plain := strings.Repeat("0123456789abcdef", 64)
	if n := parseBothWays(t, textStream(plain, 1, nil)); n < 1000 {
		t.Errorf("a 1,024-character text a character at a time: %d updates read without a parse, want at least 1,000", n)
	}
	tricks := strings.Repeat(tricky, 4)
	if n := parseBothWays(t, textStream(tricks, -2, nil)); n < utf8.RuneCountInString(tricks)/2-10 {
		t.Errorf("a text with escapes, two runes a chunk: %d updates read without a parse", n)
	}
	// A chunk that cuts a rune in two says a delta that is not what the
	// text grew by (pi would not, but a worker may write anything).
	t.Run("bytes", func(t *testing.T) { parseBothWays(t, textStream(tricks, 3, nil)) })
	// 14 text deltas in 6 blocks: each block's first starts a growth.
	if n := parseBothWays(t, recordedPi(t)); n < 8 {
		t.Errorf("pi's recorded stream: %d updates read without a parse, want 8", n)
	}
	t.Run("thinking then text", func(t *testing.T) {
		var s piLines
		s.block("thinking")
		s.grow(0, "let me think about it", 2, nil)
		s.block("text")
		s.grow(1, tricky, -1, nil)
		if n := parseBothWays(t, s.lines); n < 20 {
			t.Errorf("%d updates read without a parse", n)
		}
	})
	edits := map[string]func(j int, step, delta *string){
		"delta is not what the text grew by": func(j int, _, delta *string) {
			if j%7 == 2 {
				*delta = "x"
			}
		},
		"empty delta": func(j int, _, delta *string) {
			if j%6 == 4 {
				*delta = ""
			}
		},
		"a member added to the step": func(j int, step, _ *string) {
			if j%9 == 5 {
				*step = `"extra":1,` + *step
			}
		},
		"a Delta before the delta": func(_ int, step, _ *string) { *step = `"Delta":"D",` + *step },
		"a Delta after the delta":  func(_ int, step, _ *string) { *step += `,"Delta":"D"` },
		"a delta after the delta":  func(_ int, step, _ *string) { *step += `,"delta":"last"` },
		"a delta before the delta": func(_ int, step, _ *string) { *step = `"delta":"first",` + *step },
		"an escaped delta key": func(_ int, step, _ *string) {
			*step += `,"delt\u0061":"x"`
		},
		"contentIndex that does not decode": func(_ int, step, _ *string) {
			*step = strings.Replace(*step, `"contentIndex":0`, `"contentIndex":1.5`, 1)
		},
	}
	for name, edit := range edits {
		t.Run(name, func(t *testing.T) { parseBothWays(t, textStream(tricky, -3, edit)) })
	}
	t.Run("lines that change elsewhere", func(t *testing.T) {
		var s piLines
		s.block("text")
		s.grow(0, plain[:100], 1, func(j int, _, _ *string) {
			if j%10 == 3 {
				s.output++ // the usage changes with the text
			}
		})
		lines := s.lines
		for i := 4; i < len(lines)-2; i += 5 {
			l := bytes.Clone(lines[i])
			switch i % 4 {
			case 0: // the message copy differs from the partial
				l[bytes.LastIndex(l, []byte(`"stop"`))+2] = '0'
			case 1: // cut short
				l = l[:len(l)-1]
			case 2: // spaced out
				l = bytes.Replace(l, []byte(`"message":{`), []byte(`"message": {`), 1)
			default: // the text grew by another byte in one copy
				if j := bytes.LastIndex(l, []byte(`f"`)); j > 0 {
					l[j] = 'g'
				}
			}
			lines[i] = l
		}
		parseBothWays(t, lines)
	})
	t.Run("raw delta bytes", func(t *testing.T) {
		// The last line with bytes that are no string body where its
		// delta goes: nothing but a parse may read those lines.
		for _, raw := range []string{`"`, `\`, `\u12`, "\n", `","x":"`, `\"`, `\\`, `\u00e9`, "\xff"} {
			lines := textStream(plain[:48], 4, nil)
			last := lines[len(lines)-2] // the last delta: …"delta":"cdef" and the texts ending in cdef
			lines = append(lines[:len(lines)-1], bytes.ReplaceAll(last, []byte(`cdef"`), []byte(`cdef`+raw+`"`)))
			lines[len(lines)-1] = bytes.Replace(lines[len(lines)-1], []byte(`"delta":"cdef`), []byte(`"delta":"`), 1)
			parseBothWays(t, lines)
		}
	})
}

// FuzzLineParser streams arbitrary texts with arbitrary edits, and lines
// grown by arbitrary bytes: every line reads as ParseRecord reads it.
func FuzzLineParser(f *testing.F) {
	f.Add("hello world, this is an answer", 1, []byte{3, 0, 7, 1, 9, 2}, []byte("x"))
	f.Add(tricky, -2, []byte{1, 3, 2, 4, 5, 5}, []byte(`\"`))
	f.Add(tricky, 3, []byte{0, 6, 4, 7}, []byte(`","a":"`))
	f.Fuzz(func(t *testing.T, text string, n int, edits, raw []byte) {
		if n == 0 || n > 64 || n < -64 {
			n = 1
		}
		if len(text) > 600 {
			text = text[:600] // a stream is the square of its text
		}
		at := map[int]byte{}
		for i := 0; i+1 < len(edits); i += 2 {
			at[int(edits[i])] = edits[i+1]
		}
		var s piLines
		s.block("text")
		s.grow(0, text, n, func(j int, step, delta *string) {
			switch at[j] % 8 {
			case 1:
				s.output++
			case 2:
				*delta = text[:min(len(text), j%5)]
			case 3:
				*step = `"extra":1,` + *step
			case 4:
				s.content = append(s.content, map[string]string{"type": "text", "text": ""})
			case 5:
				*step += `,"DELTA":""`
			}
		})
		lines := s.lines
		for j, e := range at {
			if j+2 >= len(lines) {
				continue
			}
			l := bytes.Clone(lines[j+2])
			switch e % 8 {
			case 6: // a byte flipped
				l[(j*7919)%len(l)] ^= e
			case 7: // the line before, its delta raw in the three places
				l = growRaw(lines[j+1], raw)
			}
			lines[j+2] = l
		}
		parseBothWays(t, lines)
	})
}

// growRaw returns line, a text_delta of the stream, with its delta
// replaced by raw and raw appended to the text in both copies, as bytes.
func growRaw(line, raw []byte) []byte {
	var rec struct {
		Step struct {
			Delta string `json:"delta"`
		} `json:"assistantMessageEvent"`
	}
	if json.Unmarshal(line, &rec) != nil || rec.Step.Delta == "" {
		return line
	}
	d := []byte(quoted(rec.Step.Delta))
	d = d[1 : len(d)-1]
	// The text ends with the delta in both copies: `d"}]`.
	out := bytes.ReplaceAll(line, append(bytes.Clone(d), `"}]`...), append(append(bytes.Clone(d), raw...), `"}]`...))
	return bytes.Replace(out, append([]byte(`"delta":"`), d...), append([]byte(`"delta":"`), raw...), 1)
}
