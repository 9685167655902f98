package jsonscan_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"example.com/pifleet/internal/jsonscan"
	"example.com/pifleet/internal/jsonscan/jsontest"
)

// stdDepthLimit is where encoding/json gives up nesting; the scanner has
// no limit of its own unless told one.
const stdDepthLimit = 10000

func nestedBelow(b []byte, n int) bool {
	return bytes.Count(b, []byte("["))+bytes.Count(b, []byte("{")) < n
}

// FuzzJSON holds the scanner to encoding/json: it accepts exactly what
// json.Valid accepts; the members, elements and strings it cuts out of a
// valid value are what encoding/json decodes; and the walkers of
// validated bytes agree with it there, and do not panic on anything else.
// The same corpus seeds the FuzzJSON targets of every front end
// (internal/jsjson, transport, transport/pirpc).
func FuzzJSON(f *testing.F) {
	jsontest.Seed(f)
	var sc jsonscan.Scanner
	f.Fuzz(func(t *testing.T, b []byte) {
		start, end, serr := sc.Check(b)
		valid := serr == nil
		if nestedBelow(b, stdDepthLimit) && valid != json.Valid(b) {
			t.Fatalf("scanner says valid=%v (%v), json.Valid says %v, for %q", valid, serr, !valid, b)
		}
		if serr != nil && (serr.Offset < 0 || serr.Offset > len(b) || serr.Reason == "") {
			t.Fatalf("error %+v does not point into the %d bytes of %q", serr, len(b), b)
		}
		// A depth limit only refuses what is nested deeper than it.
		limited := jsonscan.Scanner{MaxDepth: 3}
		if _, _, lerr := limited.Check(b); valid && (lerr == nil) != (jsontest.Depth(b) <= 3) {
			t.Fatalf("MaxDepth 3: error %v for %q, nested %d deep", lerr, b, jsontest.Depth(b))
		}

		i := jsonscan.SkipSpace(b, 0)
		members, mend := jsonscan.AppendValidMembers(nil, b, i) // must not panic, whatever b is
		for at, first := i+1, true; i < len(b) && b[i] == '['; first = false {
			_, e, more := jsonscan.NextElement(b, at, first)
			if !more || e <= at {
				break
			}
			at = e
		}
		if !valid {
			return
		}
		if got := jsonscan.SkipValid(b, start); got != end {
			t.Fatalf("SkipValid ends the value of %q at %d, the scanner at %d", b, got, end)
		}
		var want any
		if err := json.Unmarshal(b, &want); err != nil {
			return // nested beyond encoding/json's limit
		}
		if got := decode(t, &sc, b[start:end]); !cmp.Equal(got, want) {
			t.Fatalf("%q: the scanner's parts give %v, encoding/json %v", b, got, want)
		}
		if b[start] == '{' {
			checked, cend, _ := sc.AppendMembers(nil, b, start)
			if cend != end || mend != end || !cmp.Equal(checked, members) {
				t.Fatalf("%q: AppendMembers %v (end %d), AppendValidMembers %v (end %d), value ends at %d",
					b, checked, cend, members, mend, end)
			}
		}
	})
}

// decode turns a valid value into what encoding/json would give for it
// (map[string]any, []any, string, float64, bool, nil), using only the
// scanner's parts.
func decode(t *testing.T, sc *jsonscan.Scanner, v []byte) any {
	switch v[0] {
	case '{':
		ms, _, _ := sc.AppendMembers(nil, v, 0)
		out := map[string]any{}
		for _, m := range ms {
			key := jsonscan.Unquote(v[m.KeyStart-1:m.KeyEnd+1], m.KeyEsc)
			out[key] = decode(t, sc, m.Value(v))
		}
		return out
	case '[':
		out := []any{}
		for at, first := 1, true; ; first = false {
			s, e, more := jsonscan.NextElement(v, at, first)
			if !more {
				if e < 0 {
					t.Fatalf("NextElement lost its way in %q", v)
				}
				return out
			}
			out = append(out, decode(t, sc, v[s:e]))
			at = e
		}
	case '"':
		end, esc := jsonscan.SkipString(v, 0)
		if end != len(v) {
			t.Fatalf("SkipString(%q) = %d", v, end)
		}
		return jsonscan.Unquote(v, esc)
	case 't':
		return true
	case 'f':
		return false
	case 'n':
		return nil
	}
	f, ok := jsonscan.ParseNumber(v)
	if !ok {
		t.Skip("beyond float64, which encoding/json refuses")
	}
	return f
}
