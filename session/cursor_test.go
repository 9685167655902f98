package session

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestEntriesAfterFixture(t *testing.T) {
	path := agentFixture(cloneFile)
	all, cur, err := EntriesAfter(path, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 19 || cur.EntryID != "b000000b" || cur.SessionID != "0196a1b2-0000-7000-8000-000000000002" {
		t.Fatalf("all: %d entries, cursor %+v", len(all), cur)
	}
	after, cur2, err := EntriesAfter(path, "b0000005")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"b0000006", "b0000007", "b0000008", "b0000009", "b000000a", "b000000b"}, ids(after)); d != "" {
		t.Errorf("after b0000005 (-want +got):\n%s", d)
	}
	if cur2 != cur {
		t.Errorf("cursors differ: %+v vs %+v", cur2, cur)
	}
	// At the leaf: nothing new (the torn line is not an entry yet).
	none, cur3, err := cur.Next(0)
	if err != nil || len(none) != 0 || cur3 != cur {
		t.Errorf("at the leaf: %v, %+v, %v", ids(none), cur3, err)
	}
	_, _, err = EntriesAfter(path, "deadbeef")
	var ue *UnknownEntryError
	if !errors.Is(err, ErrUnknownEntry) || !errors.As(err, &ue) || ue.EntryID != "deadbeef" {
		t.Errorf("unknown id: %v", err)
	}
}

// TestCursorExactlyOnceWhileAppending writes a session in random pieces,
// cutting lines anywhere, and reads on after every write: every entry must
// come out once, in order, and never before its LF is written.
func TestCursorExactlyOnceWhileAppending(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			var content strings.Builder
			content.WriteString(header("grow"))
			var want []string
			parent := ""
			for i := range 60 {
				id := fmt.Sprintf("%08x", i+1)
				if i > 0 && rng.IntN(5) == 0 {
					parent = want[rng.IntN(len(want))] // a branch
				}
				content.WriteString(entry(id, parent))
				want = append(want, id)
				parent = id
			}
			data := content.String()
			path := filepath.Join(t.TempDir(), "grow.jsonl")
			writeFile(t, path, data[:len(header("grow"))])
			cur := Cursor{Path: path}
			var got []string
			for written := len(header("grow")); written < len(data); {
				n := min(len(data)-written, 1+rng.IntN(300))
				appendFile(t, path, data[written:written+n])
				written += n
				es, next, err := cur.Next(1 + rng.IntN(10))
				if err != nil {
					t.Fatalf("after %d bytes: %v", written, err)
				}
				for _, e := range es {
					if e.End > int64(written) || data[e.End-1] != '\n' {
						t.Fatalf("entry %s returned before its LF was written", e.ID)
					}
				}
				got = append(got, ids(es)...)
				cur = next
			}
			for {
				es, next, err := cur.Next(7)
				if err != nil {
					t.Fatal(err)
				}
				if len(es) == 0 {
					break
				}
				got = append(got, ids(es)...)
				cur = next
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Fatalf("entries read through the cursor (-want +got):\n%s", d)
			}
		})
	}
}

func TestCursorFallsBackWhenTheFileIsRewritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	writeFile(t, path, header("sid"), entry("00000001", ""), entry("00000002", "00000001"), entry("00000003", "00000002"))
	_, cur, err := EntriesAfter(path, "00000002")
	if err != nil {
		t.Fatal(err)
	}
	// pi rewrote the file (a migration): same entries, other offsets.
	writeFile(t, path, header("sid"), "\n\n", entry("00000001", ""), entry("00000002", "00000001"), entry("00000003", "00000002"), entry("00000004", "00000003"))
	es, next, err := cur.Next(0)
	if err != nil || cmp.Diff([]string{"00000004"}, ids(es)) != "" || next.EntryID != "00000004" {
		t.Fatalf("after a rewrite: %v, %+v, %v", ids(es), next, err)
	}
	// The entry is gone: ErrUnknownEntry, so the caller reads afresh.
	writeFile(t, path, header("sid"), entry("00000009", ""))
	if _, _, err := next.Next(0); !errors.Is(err, ErrUnknownEntry) {
		t.Errorf("entry gone: %v", err)
	}
	// Another session at the same path: not a continuation, even if the
	// entry id happens to exist there.
	writeFile(t, path, header("other"), entry("00000001", ""), entry("00000002", "00000001"), entry("00000003", "00000002"), entry("00000004", "00000003"))
	_, _, err = cur.Next(0)
	var ue *UnknownEntryError
	if !errors.As(err, &ue) || !strings.Contains(ue.Reason, "session id changed") {
		t.Errorf("replaced file: %v", err)
	}
}

func TestCursorUsesTheOffset(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	writeFile(t, path, header("sid"), entry("00000001", ""), entry("00000002", "00000001"))
	_, cur, err := EntriesAfter(path, "")
	if err != nil {
		t.Fatal(err)
	}
	// Corrupt the first entry's line in place: a cursor that rescanned from
	// the start would hit it; one that seeks to its own entry does not.
	raw, _ := os.ReadFile(path)
	copy(raw[len(header("sid")):], "garbage!")
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	appendFile(t, path, entry("00000003", "00000002"))
	es, _, err := cur.Next(0)
	if err != nil || cmp.Diff([]string{"00000003"}, ids(es)) != "" {
		t.Fatalf("resume from offset: %v, %v", ids(es), err)
	}
}

func TestCursorStopsAtACorruptLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	writeFile(t, path, header("sid"), entry("00000001", ""), entry("00000002", "00000001"), "{not json\n", entry("00000004", "00000002"))
	es, cur, err := EntriesAfter(path, "")
	var le *LineError
	if !errors.As(err, &le) || le.Line != 4 {
		t.Fatalf("err = %v, want a LineError for line 4", err)
	}
	if d := cmp.Diff([]string{"00000001", "00000002"}, ids(es)); d != "" || cur.EntryID != "00000002" {
		t.Errorf("entries before the corrupt line (-want +got):\n%s; cursor %+v", d, cur)
	}
}
