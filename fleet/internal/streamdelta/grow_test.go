package streamdelta

import (
	"bytes"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// codeBothWays codes lines with an encoder that follows growth and one
// that parses every line, and fails on the first line they code
// differently. It returns how many lines the first coded without a parse.
func codeBothWays(t *testing.T, lines [][]byte) (grown int) {
	t.Helper()
	var fast, parsed Encoder
	parsed.parseAll = true
	for i, l := range lines {
		seq := uint64(i + 1)
		a, b := fast.Encode(seq, l), parsed.Encode(seq, l)
		if fast.base == nil && fast.grow.line != nil {
			grown++
		}
		if d := cmp.Diff(codedView(b), codedView(a)); d != "" {
			t.Fatalf("line %d coded differently without a parse (-parsed +grown):\n%s\nline: %s", i, d, l)
		}
	}
	return grown
}

// codedView is what a Coded says, in comparable form.
type codedForm struct {
	Seq, Base                uint64
	Line, Delta, Short, Tree string
	Links, EndsRun           bool
	Finished                 int
	RefPaths                 [][]int
	RefSeqs                  []uint64
}

func codedView(c Coded) codedForm {
	v := codedForm{Seq: c.Seq, Base: c.base, Line: string(c.line), Delta: string(c.delta), Short: string(c.short),
		Links: c.links, EndsRun: c.endsRun, Finished: c.finished}
	if c.tree != nil {
		v.Tree = string(c.tree.appendTo(nil))
	}
	for _, r := range c.refs {
		v.RefPaths, v.RefSeqs = append(v.RefPaths, r.path), append(v.RefSeqs, r.seq)
	}
	return v
}

// growingText streams text in chunks of n characters the way the
// scripted worker does: nothing but the text and the step change. edit,
// when not nil, may change update j (a step, or the text, before it is
// written).
func growingText(text string, n int, edit func(j int, step *ordered, s *piStream)) [][]byte {
	s := newPiStream()
	s.start()
	s.content = []ordered{{{"type", "text"}, {"text", ""}}}
	s.update(ordered{{"type", "text_start"}, {"contentIndex", 0}})
	acc := ""
	for j, chunk := range chunks(text, n) {
		acc += chunk
		s.content[0] = s.content[0].with("text", acc)
		step := ordered{{"type", "text_delta"}, {"contentIndex", 0}, {"delta", chunk}}
		if edit != nil {
			edit(j, &step, s)
		}
		s.update(step)
	}
	s.update(ordered{{"type", "text_end"}, {"contentIndex", 0}, {"content", acc}})
	s.end()
	return s.lines
}

// AC: streamed text is coded without parsing each update, and the coded
// forms are byte for byte the ones a parse gives: for the usual update
// (one more chunk), for every update that is not only that (the usage
// changes, the delta says something else than what the text grew by, an
// empty or a long delta, escapes, a line cut short), and for pi's and the
// scripted worker's streams.
func TestGrowthCodesAsTheParse(t *testing.T) {
	plain := strings.Repeat("0123456789abcdef", 64)
	if n := codeBothWays(t, growingText(plain, 1, nil)); n < 1000 {
		t.Errorf("a 1,024-character text streamed a character at a time: %d updates coded without a parse, want at least 1,000", n)
	}
	if n := codeBothWays(t, growingText(answer(500), 16, nil)); n < 25 {
		t.Errorf("a text with escapes in 16-character chunks: %d updates coded without a parse, want at least 25", n)
	}
	edits := map[string]func(j int, step *ordered, s *piStream){
		"usage changes": func(j int, _ *ordered, s *piStream) {
			if j%5 == 3 {
				s.usage = s.usage.with("output", j)
			}
		},
		"delta is not what the text grew by": func(j int, step *ordered, _ *piStream) {
			if j%7 == 2 {
				*step = step.with("delta", "x")
			}
		},
		"empty delta": func(j int, step *ordered, s *piStream) {
			if j%6 == 4 {
				*step = step.with("delta", "")
			}
		},
		"a member added to the step": func(j int, step *ordered, _ *piStream) {
			if j%9 == 5 {
				*step = append(*step, kv{"extra", j})
			}
		},
		"a second block": func(j int, _ *ordered, s *piStream) {
			if j == 40 {
				s.content = append(s.content, ordered{{"type", "text"}, {"text", "more"}})
			}
		},
	}
	for name, edit := range edits {
		t.Run(name, func(t *testing.T) { codeBothWays(t, growingText(answer(200), 3, edit)) })
	}
	t.Run("long delta", func(t *testing.T) { codeBothWays(t, growingText(strings.Repeat("a reference?", 40), 60, nil)) })
	t.Run("cut and changed lines", func(t *testing.T) {
		lines := growingText(plain[:200], 2, nil)
		for i := 3; i < len(lines)-2; i += 5 {
			switch i % 4 {
			case 3:
				// The partial changes where the message does not.
				lines[i] = bytes.Replace(lines[i], []byte(`"stop"`), []byte(`"st0p"`), 1)
			case 0:
				lines[i] = lines[i][:len(lines[i])-1]
			case 1:
				lines[i] = bytes.Replace(lines[i], []byte(`"message":{`), []byte(`"message": {`), 1)
			default:
				j := bytes.LastIndex(lines[i], []byte(`f"`))
				if j > 0 {
					lines[i] = append(bytes.Clone(lines[i][:j]), append([]byte("g"), lines[i][j+1:]...)...)
				}
			}
		}
		codeBothWays(t, lines)
	})
	t.Run("scripted", func(t *testing.T) { codeBothWays(t, scriptedStream()) })
	t.Run("recorded pi", func(t *testing.T) { codeBothWays(t, recordedPi(t)) })
}

// FuzzGrowthCodesAsTheParse streams arbitrary texts with arbitrary edits:
// following growth must code every line as a parse does.
func FuzzGrowthCodesAsTheParse(f *testing.F) {
	f.Add("hello world, this is an answer", 1, []byte{3, 0, 7, 1, 9, 2})
	f.Add("\"\\\u2028\x01é🚀 \xed\xa0\xbd", 2, []byte{1, 3, 2, 4, 5, 5})
	f.Fuzz(func(t *testing.T, text string, n int, edits []byte) {
		if n <= 0 || n > 64 {
			n = 1
		}
		if r := []rune(text); len(r) > 300 {
			text = string(r[:300]) // a stream is the square of its text
		}
		at := map[int]byte{}
		for i := 0; i+1 < len(edits); i += 2 {
			at[int(edits[i])] = edits[i+1]
		}
		lines := growingText(text, n, func(j int, step *ordered, s *piStream) {
			switch at[j] % 6 {
			case 1:
				s.usage = s.usage.with("output", j)
			case 2:
				*step = step.with("delta", text[:min(len(text), j%5)])
			case 3:
				*step = append(*step, kv{"extra", j})
			case 4:
				s.content = append(s.content, ordered{{"type", "text"}, {"text", ""}})
			}
		})
		// An edit of 5 flips a byte of the line.
		for j, e := range at {
			if e%6 == 5 && j+2 < len(lines) {
				l := bytes.Clone(lines[j+2])
				l[(j*7919)%len(l)] ^= byte(e)
				lines[j+2] = l
			}
		}
		codeBothWays(t, lines)
	})
}

// AC: GrowthOf, for a reader that keeps no tree of the last line (the
// agent's worker), finds from two lines the growth the encoder follows,
// and refuses a step that could be read as naming its delta twice.
func TestGrowthOfFindsTheEncodersGrowth(t *testing.T) {
	streams := map[string][][]byte{
		"plain":       growingText(strings.Repeat("0123456789abcdef", 8), 1, nil),
		"escapes":     growingText(answer(300), 5, nil),
		"scripted":    scriptedStream(),
		"recorded pi": recordedPi(t),
	}
	for name, lines := range streams {
		t.Run(name, func(t *testing.T) {
			var enc Encoder
			found := 0
			for i, l := range lines {
				enc.Encode(uint64(i+1), l)
				if enc.grow.line == nil || i == 0 {
					continue
				}
				g, ok := GrowthOf(lines[i-1], l)
				if !ok || !cmp.Equal(g, enc.grow.Growth, cmp.AllowUnexported(Growth{})) {
					t.Fatalf("line %d: GrowthOf = %+v, %v; the encoder follows %+v", i, g, ok, enc.grow.Growth)
				}
				found++
			}
			if found == 0 {
				t.Error("the encoder followed no growth")
			}
		})
	}
	lines := growingText("hello, world", 3, nil)
	if _, ok := GrowthOf(lines[1], lines[2]); !ok {
		t.Fatal("no growth from the first delta to the second")
	}
	var f GrowthFinder
	try := func() {
		if _, ok := f.Of(lines[1], lines[2]); !ok {
			t.Fatal("no growth from the first delta to the second")
		}
	}
	fresh := bytesPerRun(100, func() { GrowthOf(lines[1], lines[2]) })
	if again := bytesPerRun(100, try); again > fresh/8 {
		t.Errorf("a GrowthFinder allocates %d bytes a try, a fresh GrowthOf %d: the finder's parses should reuse its memory", again, fresh)
	}
	end := lines[len(lines)-2] // text_end
	if !bytes.Contains(end, []byte(`"text_end"`)) {
		t.Fatalf("not the text's end: %s", end)
	}
	if n := testing.AllocsPerRun(10, func() { f.Of(lines[len(lines)-3], end) }); n != 0 {
		t.Errorf("a GrowthFinder's try of a text's end allocates %v times, want none: a line without a delta needs no parse", n)
	}
	for _, twice := range []string{`"Delta":"x",`, `"DELTA":"x",`, `"delt\u0061":"x",`, `"delta":"x",`} {
		l := bytes.Replace(lines[2], []byte(`"delta":`), []byte(twice+`"delta":`), 1)
		if g, ok := GrowthOf(lines[1], l); ok {
			t.Errorf("a step with %s: GrowthOf = %+v", twice, g)
		}
	}
}

// bytesPerRun is what f allocates a call, on average over n calls after
// a first one.
func bytesPerRun(n int, f func()) uint64 {
	f()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		f()
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / uint64(n)
}
