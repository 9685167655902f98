package streamdelta

import (
	"bytes"
	"testing"

	"example.com/pifleet/transport"
)

// sameTree reports whether a and b are the same tree: kinds, bytes, keys
// and members alike.
func sameTree(a, b *node) bool {
	if a.kind != b.kind || a.open != b.open || !bytes.Equal(a.raw, b.raw) || len(a.keys) != len(b.keys) || len(a.kids) != len(b.kids) {
		return false
	}
	for i := range a.keys {
		if !bytes.Equal(a.keys[i], b.keys[i]) {
			return false
		}
	}
	for i := range a.kids {
		if !sameTree(a.kids[i], b.kids[i]) {
			return false
		}
	}
	return true
}

// FuzzDeltaOnly: the Rebuilder's reading of a short entry that is a delta
// alone must be parseTree's, and must take every such entry parseTree
// takes.
func FuzzDeltaOnly(f *testing.F) {
	for _, s := range []string{`["x"]`, `[""]`, `["a\"b\\c\u2028é🚀"]`, `["x",1]`, `[ "x"]`, `["x" ]`, `["x"]]`, `["x`, `["\x01"]`, `[1]`, `{"u":1}`, `["\u00"]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, entry []byte) {
		var r Rebuilder
		fast, ok := r.deltaOnly(entry)
		general, err := parseTree(entry, nil)
		isDelta := err == nil && general.kind == '[' && len(general.kids) == 1 && general.kids[0].isString()
		if ok != isDelta {
			t.Fatalf("%q: deltaOnly %v, parseTree %v (err %v)", entry, ok, isDelta, err)
		}
		if ok && !sameTree(fast, general) {
			t.Fatalf("%q: deltaOnly reads %q, parseTree %q", entry, fast.appendTo(nil), general.appendTo(nil))
		}
	})
}

// apply with copies from an arena must change a tree as apply without one
// does and, as it, leave the tree it was given reading as before.
func TestApplyFromAnArenaIsApply(t *testing.T) {
	root, err := parseTree([]byte(`{"role":"assistant","content":[{"type":"text","text":"ab"},{"type":"thinking","thinking":""}],"n":1,"s":"x"}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	before := string(root.appendTo(nil))
	ops := []op{
		{path: []int{1, 0, 1}, kind: opDelta},
		{path: []int{1, 1, 1}, kind: opDelta},
		{path: []int{3}, kind: opString, val: []byte(`"\"q\u00e9"`)},
		{path: []int{2}, kind: opDelta},          // not a string
		{path: []int{1, 5, 1}, kind: opDelta},    // off the message
		{path: []int{1, 0, 1, 0}, kind: opDelta}, // into a leaf
	}
	for _, delta := range [][]byte{[]byte(`c\n`), nil} {
		for i := range ops {
			a := new(arena)
			want, wantErr := ops[i].apply(root, delta, nil)
			got, gotErr := ops[i].apply(root, delta, a)
			if (wantErr == nil) != (gotErr == nil) || wantErr != nil && wantErr.Error() != gotErr.Error() {
				t.Fatalf("op %d, delta %q: apply's error %v, from an arena %v", i, delta, wantErr, gotErr)
			}
			if wantErr == nil {
				if !sameTree(want, got) {
					t.Fatalf("op %d: apply gives %s, from an arena %s", i, want.appendTo(nil), got.appendTo(nil))
				}
				// Again on the result: the string is now open, appended in place.
				want2, _ := ops[i].apply(want, []byte("d"), nil)
				got2, _ := ops[i].apply(got, []byte("d"), a)
				if string(want2.appendTo(nil)) != string(got2.appendTo(nil)) || string(want.appendTo(nil)) != string(got.appendTo(nil)) {
					t.Fatalf("op %d twice: apply gives %s, from an arena %s", i, want2.appendTo(nil), got2.appendTo(nil))
				}
			}
			if s := string(root.appendTo(nil)); s != before {
				t.Fatalf("op %d changed the tree it was given: %s", i, s)
			}
		}
	}
}

// A text streamed with nothing else changing is coded as short entries of
// the delta alone, which the Rebuilder reads on its fast path (deltaOnly,
// the chain's ops shared, the string grown in place and put in when the
// line is written, the entry for DeltaAfter written when asked): the
// events are pi's byte for byte, read at once or late, and each reads as
// a change to the one before it as the general path's long entry does.
func TestADeltaOnlyRunRebuildsIdentically(t *testing.T) {
	for _, chunk := range []int{1, 3, 16} {
		raw := answerLines(answer(300), chunk)
		for _, flush := range []int{1, 7, 1000} {
			got, _ := relay(t, raw, flush, nil)
			checkSame(t, raw, got)
			lines := rebuiltLines(t, raw, flush)
			fast := 0
			for i := 1; i < len(lines); i++ {
				if lines[i].text != nil { // grown, not yet written
					fast++
				}
				entry, ok := lines[i].DeltaAfter(lines[i-1])
				if !ok {
					continue
				}
				// The reader's side: the line before, whole, then the entry.
				rb := NewRebuilder(transport.MaxFrameBytes)
				prev := append(append([]byte(`[{"e":`), lines[i-1].Bytes()...), "}]"...)
				if err := rb.Rebuild("r", 1, nil, prev, func(uint64, []byte, []byte) {}); err != nil {
					t.Fatal(err)
				}
				one := uint64(1)
				var back []byte
				if err := rb.Rebuild("r", 2, &one, append(append([]byte{'['}, entry...), ']'), func(_ uint64, l, _ []byte) { back = l }); err != nil {
					t.Fatalf("line %d: %v\n%s", i, err, entry)
				}
				if !bytes.Equal(back, raw[i]) || !bytes.Equal(lines[i].Bytes(), raw[i]) {
					t.Fatalf("line %d rebuilt as\n%s\nwant\n%s", i, back, raw[i])
				}
			}
			if want := len(raw) - 6; fast < want {
				t.Fatalf("chunk %d, flush %d: %d lines of %d on the fast path, want %d", chunk, flush, fast, len(raw), want)
			}
		}
	}
}

// FuzzDeltaRun streams arbitrary texts as short entries of their deltas
// alone (grow's runs), in frames of any size, some lines read as they
// come and the others once all are rebuilt: every event must be pi's.
func FuzzDeltaRun(f *testing.F) {
	f.Add("hello world, this is an answer", 1, 3)
	f.Add("\"\\\u2028\x01é🚀 tail", 2, 1)
	f.Fuzz(func(t *testing.T, text string, chunk, flush int) {
		if chunk <= 0 || chunk > 64 {
			chunk = 1
		}
		if flush <= 0 || flush > 1000 {
			flush = 7
		}
		raw := answerLines(text, chunk)
		got, _ := relay(t, raw, flush, nil)
		for i := range raw {
			if !bytes.Equal(got[i], raw[i]) {
				t.Fatalf("event %d differs:\n pi: %s\n got: %s", i, raw[i], got[i])
			}
		}
	})
}
