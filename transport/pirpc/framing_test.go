package pirpc

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

func readAll(t *testing.T, lr *LineReader) (lines []string, tooLong []int64) {
	t.Helper()
	for {
		b, err := lr.Next()
		var tl *LineTooLongError
		switch {
		case err == nil:
			lines = append(lines, string(b))
		case errors.As(err, &tl):
			tooLong = append(tooLong, tl.Bytes)
		case errors.Is(err, io.EOF):
			return lines, tooLong
		default:
			t.Fatalf("Next: %v", err)
		}
	}
}

func TestLineReaderSplitsLikePi(t *testing.T) {
	in := "{\"a\":1}\n" + // plain
		"{\"b\":2}\r\n" + // CRLF: one CR stripped
		"{\"c\":\"x\r\"}\r\r\n" + // only one CR stripped
		"\n\r\n" + // empty records skipped
		"{\"d\":\"\u2028\u2029\"}\n" + // line separators are data
		"{\"e\":\"tail\"}" // unterminated last record
	want := []string{`{"a":1}`, `{"b":2}`, "{\"c\":\"x\r\"}\r", "{\"d\":\"\u2028\u2029\"}", `{"e":"tail"}`}
	for name, r := range map[string]io.Reader{
		"whole":     strings.NewReader(in),
		"bytewise":  iotest.OneByteReader(strings.NewReader(in)),
		"half-read": iotest.HalfReader(strings.NewReader(in)),
	} {
		t.Run(name, func(t *testing.T) {
			got, tooLong := readAll(t, NewLineReader(r, 0))
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
			if len(tooLong) != 0 {
				t.Errorf("unexpected overlong records %v", tooLong)
			}
		})
	}
}

func TestLineReaderSkipsOverlongRecords(t *testing.T) {
	const max = 100
	long := strings.Repeat("x", 300_000) // spans many buffer fills
	in := "ok1\n" + long + "\n" + strings.Repeat("y", max) + "\n" + strings.Repeat("z", max+1) + "\r\n" + "ok2\n" + long
	got, tooLong := readAll(t, NewLineReader(strings.NewReader(in), max))
	if diff := cmp.Diff([]string{"ok1", strings.Repeat("y", max), "ok2"}, got); diff != "" {
		t.Errorf("records (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int64{300_000, max + 2, 300_000}, tooLong); diff != "" {
		t.Errorf("overlong sizes (-want +got):\n%s", diff)
	}
}

func TestLineReaderRecordsAreOwned(t *testing.T) {
	lr := NewLineReader(strings.NewReader("aaaa\nbbbb\n"), 0)
	first, _ := lr.Next()
	second, _ := lr.Next()
	if string(first) != "aaaa" || string(second) != "bbbb" {
		t.Fatalf("got %q %q: a record was overwritten by the next read", first, second)
	}
}

func TestLineReaderReportsReadErrors(t *testing.T) {
	boom := errors.New("boom")
	lr := NewLineReader(io.MultiReader(strings.NewReader("a\n"), iotest.ErrReader(boom)), 0)
	if b, err := lr.Next(); err != nil || string(b) != "a" {
		t.Fatalf("first: %q %v", b, err)
	}
	if _, err := lr.Next(); !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
}

func TestAppendLine(t *testing.T) {
	got, err := appendLine(nil, []byte(`{"type":"abort"}`+"\n"))
	if err != nil || string(got) != "{\"type\":\"abort\"}\n" {
		t.Fatalf("got %q %v", got, err)
	}
	if _, err := appendLine(nil, []byte("{\"a\":1}\n{\"b\":2}")); !errors.Is(err, ErrEmbeddedNewline) {
		t.Fatalf("err = %v, want ErrEmbeddedNewline", err)
	}
}

// FuzzLineReader checks the reader against a straightforward model: split
// on LF, strip one CR, drop empty and overlong records.
func FuzzLineReader(f *testing.F) {
	f.Add([]byte("a\nb\r\n\n\r\nc"), uint8(4))
	f.Add([]byte("\u2028\n\r\r\n"), uint8(1))
	f.Add(bytes.Repeat([]byte("x"), 70000), uint8(200))
	f.Fuzz(func(t *testing.T, in []byte, maxSeed uint8) {
		max := int(maxSeed)%64 + 1
		var want []string
		for i, rec := range bytes.Split(in, []byte{'\n'}) {
			if i == bytes.Count(in, []byte{'\n'}) && len(rec) == 0 {
				break
			}
			rec = bytes.TrimSuffix(rec, []byte{'\r'})
			if len(rec) == 0 || len(rec) > max {
				continue
			}
			want = append(want, string(rec))
		}
		lr := NewLineReader(iotest.HalfReader(bytes.NewReader(in)), max)
		var got []string
		for {
			b, err := lr.Next()
			var tl *LineTooLongError
			if errors.As(err, &tl) {
				continue
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("Next: %v", err)
			}
			if len(b) == 0 || len(b) > max {
				t.Fatalf("bad record %q (max %d)", b, max)
			}
			got = append(got, string(b))
		}
		if !cmp.Equal(want, got) {
			t.Fatalf("records differ (-want +got):\n%s", cmp.Diff(want, got))
		}
	})
}
