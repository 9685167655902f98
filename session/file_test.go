package session

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestReadClone(t *testing.T) {
	f, err := Read(agentFixture(cloneFile))
	if err != nil {
		t.Fatal(err)
	}
	h := f.Header
	if h.Version != 3 || h.ID != "0196a1b2-0000-7000-8000-000000000002" || h.Cwd != "/work/api" ||
		!strings.HasSuffix(h.ParentSession, "_0196a1b2-0000-7000-8000-000000000001.jsonl") {
		t.Errorf("header = %+v", h)
	}
	if !f.Torn {
		t.Error("the unterminated last line was not reported as torn")
	}
	wantIDs := []string{"a0000001", "a0000002", "a0000003", "a0000004", "a0000005", "a0000006", "a0000007", "a0000008",
		"b0000001", "b0000002", "b0000003", "b0000004", "b0000005", "b0000006", "b0000007", "b0000008", "b0000009", "b000000a", "b000000b"}
	if d := cmp.Diff(wantIDs, ids(f.Entries)); d != "" {
		t.Errorf("entries (-want +got):\n%s", d)
	}
	byID := map[string]Entry{}
	for _, e := range f.Entries {
		byID[e.ID] = e
	}
	checks := []struct {
		id   string
		ok   bool
		what string
	}{
		{"a0000001", byID["a0000001"].Type == TypeModelChange && byID["a0000001"].Provider == "faux" && byID["a0000001"].ModelID == "faux-1" && byID["a0000001"].ParentID == "", "model_change"},
		{"a0000002", byID["a0000002"].ThinkingLevel == "off", "thinking_level_change"},
		{"a0000003", byID["a0000003"].Role == "user", "user message"},
		{"a0000004", byID["a0000004"].Role == "assistant", "assistant message"},
		{"a0000005", byID["a0000005"].Role == "toolResult", "tool result"},
		{"a0000007", byID["a0000007"].Type == TypeCompaction && byID["a0000007"].FirstKeptEntryID == "a0000006" && byID["a0000007"].TokensBefore == 1234 && strings.Contains(string(byID["a0000007"].Details), "readFiles"), "compaction"},
		{"b0000001", byID["b0000001"].Type == TypeSessionInfo && byID["b0000001"].Name == "task:t42:fix-tests", "session_info"},
		{"b0000006", byID["b0000006"].Type == TypeBranchSummary && byID["b0000006"].FromID == "b0000005" && byID["b0000006"].ParentID == "b0000002", "branch_summary"},
		{"b0000009", byID["b0000009"].Type == TypeLabel && byID["b0000009"].TargetID == "b0000005" && byID["b0000009"].Label == "first attempt", "label"},
		{"b000000a", byID["b000000a"].Type == TypeCustom && byID["b000000a"].CustomType == "pifleet-provision" && strings.Contains(string(byID["b000000a"].Data), "sha256:0f0f"), "custom"},
		{"b000000b", byID["b000000b"].Type == TypeCustomMessage && byID["b000000b"].Display && string(byID["b000000b"].Content) == `"Reviewer: please keep the fix minimal."`, "custom_message"},
	}
	for _, c := range checks {
		if !c.ok {
			t.Errorf("%s %s: %+v", c.what, c.id, byID[c.id])
		}
	}
	// Positions: line numbers count the header; Raw is the line itself.
	e := byID["a0000003"]
	if e.Line != 4 || !strings.HasPrefix(string(e.Raw), `{"type":"message","id":"a0000003"`) || e.End <= e.Offset {
		t.Errorf("a0000003 at line %d, offset %d..%d, raw %.40s", e.Line, e.Offset, e.End, e.Raw)
	}
	if ts, err := e.Time(); err != nil || ts.UnixMilli() != 1777626001000 {
		t.Errorf("Time() = %v, %v", ts, err)
	}
	if f.Name() != "task:t42:fix-tests" {
		t.Errorf("Name() = %q", f.Name())
	}
}

func TestTreeOfClone(t *testing.T) {
	f, err := Read(agentFixture(cloneFile))
	if err != nil {
		t.Fatal(err)
	}
	tr := f.Tree
	if tr.Len() != 19 || tr.Leaf() != "b000000b" {
		t.Fatalf("len %d, leaf %q", tr.Len(), tr.Leaf())
	}
	// b0000006 (branch_summary) branches off b0000002: b0000002 has two children.
	if d := cmp.Diff([]string{"b0000003", "b0000006"}, tr.Children("b0000002")); d != "" {
		t.Errorf("children of b0000002 (-want +got):\n%s", d)
	}
	wantBranch := []string{"a0000001", "a0000002", "a0000003", "a0000004", "a0000005", "a0000006", "a0000007", "a0000008",
		"b0000001", "b0000002", "b0000006", "b0000007", "b0000008", "b0000009", "b000000a", "b000000b"}
	if d := cmp.Diff(wantBranch, tr.Branch(tr.Leaf())); d != "" {
		t.Errorf("active branch (-want +got):\n%s", d)
	}
	if p, ok := tr.Parent("b0000006"); !ok || p != "b0000002" {
		t.Errorf("Parent(b0000006) = %q, %v", p, ok)
	}
	if tr.Branch("nope") != nil || tr.Has("nope") {
		t.Error("unknown id has a branch")
	}
	if d := cmp.Diff([]string{"a0000001"}, tr.Children("")); d != "" {
		t.Errorf("roots (-want +got):\n%s", d)
	}
}

func TestSummarizeFixtures(t *testing.T) {
	tests := []struct {
		file     string
		name     string
		leaf     string
		entries  int
		messages map[string]int
		torn     bool
	}{
		{baselineFile, "baseline:api", "a0000008", 8, map[string]int{"user": 1, "assistant": 2, "toolResult": 1}, false},
		{cloneFile, "task:t42:fix-tests", "b000000b", 19, map[string]int{"user": 3, "assistant": 5, "toolResult": 2}, true},
		// Renamed twice: the last session_info wins, trimmed.
		{scratchFile, "Second idea", "c0000007", 7, map[string]int{"user": 1, "assistant": 1, "bashExecution": 1}, false},
		// TypeScript format: the name is in the header.
		{legacyFile, "baseline:legacy", "d0000001", 1, map[string]int{"user": 1}, false},
	}
	for _, tc := range tests {
		t.Run(filepath.Base(tc.file), func(t *testing.T) {
			s, err := Summarize(agentFixture(tc.file))
			if err != nil {
				t.Fatal(err)
			}
			if s.Name != tc.name || s.Leaf != tc.leaf || s.Entries != tc.entries || s.Torn != tc.torn || s.Corrupt != 0 {
				t.Errorf("got name %q leaf %q entries %d torn %v corrupt %d", s.Name, s.Leaf, s.Entries, s.Torn, s.Corrupt)
			}
			if d := cmp.Diff(tc.messages, s.Messages); d != "" {
				t.Errorf("messages by role (-want +got):\n%s", d)
			}
		})
	}
}

func TestSummaryCountsByType(t *testing.T) {
	s, err := Summarize(agentFixture(cloneFile))
	if err != nil {
		t.Fatal(err)
	}
	want := map[EntryType]int{TypeModelChange: 1, TypeThinkingLevelChange: 1, TypeMessage: 10, TypeCompaction: 1,
		TypeSessionInfo: 2, TypeBranchSummary: 1, TypeLabel: 1, TypeCustom: 1, TypeCustomMessage: 1}
	if d := cmp.Diff(want, s.ByType); d != "" {
		t.Errorf("by type (-want +got):\n%s", d)
	}
	if s.LastTimestamp != "2026-05-01T10:01:05.000Z" {
		t.Errorf("last timestamp %q", s.LastTimestamp)
	}
}

func TestEmptySessionInfoClearsTheName(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	writeFile(t, path,
		`{"type":"session","version":3,"id":"x","timestamp":"t","cwd":"/w","name":"from header"}`+"\n",
		`{"type":"session_info","id":"00000001","parentId":null,"timestamp":"t","name":"named"}`+"\n",
		`{"type":"session_info","id":"00000002","parentId":"00000001","timestamp":"t","name":"   "}`+"\n")
	s, err := Summarize(path)
	if err != nil || s.Name != "" {
		t.Fatalf("name %q, err %v; an empty session_info clears the name (pi), the header is not a fallback then", s.Name, err)
	}
}

func TestCorruptLineInTheMiddle(t *testing.T) {
	path := brokenFixture("corrupt-middle.jsonl")
	_, err := Read(path)
	var le *LineError
	if !errors.As(err, &le) || le.Line != 3 || !errors.Is(err, ErrMalformedLine) {
		t.Fatalf("Read: %v; want a malformed-line error naming line 3", err)
	}
	if !strings.Contains(err.Error(), "line 3") {
		t.Errorf("message %q does not name the line", err)
	}
	// Summarize counts it and still sees the session and its name.
	s, err := Summarize(path)
	if err != nil {
		t.Fatal(err)
	}
	if s.Corrupt != 1 || s.FirstCorrupt == nil || s.FirstCorrupt.Line != 3 || s.Name != "survivor" || s.Entries != 2 {
		t.Errorf("summary: corrupt %d (%v), name %q, entries %d", s.Corrupt, s.FirstCorrupt, s.Name, s.Entries)
	}
}

func TestBadFilesFailByName(t *testing.T) {
	tests := []struct {
		path string
		want error
	}{
		{brokenFixture("not-a-session.jsonl"), ErrNotSession},
		{brokenFixture("v1.jsonl"), ErrUnsupportedVersion},
		{brokenFixture("duplicate-id.jsonl"), ErrDuplicateEntry},
		{agentFixture(emptyFile), ErrNoHeader},
	}
	for _, tc := range tests {
		t.Run(filepath.Base(tc.path), func(t *testing.T) {
			_, err := Read(tc.path)
			var le *LineError
			if !errors.Is(err, tc.want) || !errors.As(err, &le) {
				t.Fatalf("Read: %v, want %v as a *LineError", err, tc.want)
			}
		})
	}
	// A version 1 file still summarises (its header and lines are readable).
	s, err := Summarize(brokenFixture("v1.jsonl"))
	if err != nil || s.Entries != 2 || s.Messages["assistant"] != 1 {
		t.Errorf("v1 summary: %+v, %v", s, err)
	}
}

func TestLineCap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.jsonl")
	long := `{"type":"message","id":"00000002","parentId":"00000001","timestamp":"t","message":{"role":"user","content":"` +
		strings.Repeat("x", 200_000) + `"}}` + "\n"
	writeFile(t, path, header("big"), entry("00000001", ""), long, entry("00000003", "00000002"))

	_, err := Read(path, WithMaxLineBytes(100_000))
	var le *LineError
	if !errors.Is(err, ErrLineTooLong) || !errors.As(err, &le) || le.Line != 3 {
		t.Fatalf("Read with a 100 kB cap: %v; want ErrLineTooLong at line 3", err)
	}
	s, err := Summarize(path, WithMaxLineBytes(100_000))
	if err != nil || s.Corrupt != 1 || s.Entries != 2 || s.Leaf != "00000003" {
		t.Errorf("Summarize with a cap: %+v, %v", s, err)
	}
	f, err := Read(path, WithMaxLineBytes(300_000))
	if err != nil || len(f.Entries) != 3 || len(f.Entries[1].Raw) != len(long)-1 {
		t.Errorf("Read with room: %v", err)
	}
}

func TestCRLFAndBlankLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crlf.jsonl")
	writeFile(t, path, strings.ReplaceAll(header("crlf"), "\n", "\r\n"), "\n", "  \r\n",
		strings.ReplaceAll(entry("00000001", ""), "\n", "\r\n"), entry("00000002", "00000001"))
	f, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"00000001", "00000002"}, ids(f.Entries)); d != "" || f.Entries[0].Line != 4 {
		t.Errorf("entries (-want +got):\n%s (first at line %d)", d, f.Entries[0].Line)
	}
	if strings.HasSuffix(string(f.Entries[0].Raw), "\r") {
		t.Error("CR kept in Raw")
	}
}
