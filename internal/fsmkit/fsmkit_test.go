package fsmkit_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"example.com/pifleet/internal/fsmkit"
)

type st string
type ev string

func door(t *testing.T) *fsmkit.Table[st, ev] {
	t.Helper()
	tb, err := fsmkit.NewTable(fsmkit.Spec[st, ev]{
		Name:    "door",
		Initial: "closed",
		Final:   []st{"gone"},
		Transitions: []fsmkit.Transition[st, ev]{
			{Event: "open", Src: []st{"closed"}, Dst: "opened"},
			{Event: "close", Src: []st{"opened"}, Dst: "closed"},
			{Event: "knock", Src: []st{"closed"}, Dst: "closed"},
			{Event: "remove", Src: []st{"closed", "opened"}, Dst: "gone"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func TestFireMovesAndRejectsStaleEvents(t *testing.T) {
	tb := door(t)
	m := tb.Start()
	if err := m.Fire("open"); err != nil || m.State() != "opened" {
		t.Fatalf("open: state %s, err %v", m.State(), err)
	}
	err := m.Fire("open")
	var stale *fsmkit.StaleEventError
	if !errors.As(err, &stale) || !errors.Is(err, fsmkit.ErrStaleEvent) {
		t.Fatalf("second open: got %v, want a StaleEventError", err)
	}
	if stale.State != "opened" || stale.Event != "open" || stale.Machine != "door" {
		t.Errorf("stale error fields: %+v", stale)
	}
	if m.State() != "opened" {
		t.Errorf("a rejected event moved the machine to %s", m.State())
	}
	if err := m.Fire("close"); err != nil {
		t.Fatal(err)
	}
	if err := m.Fire("knock"); err != nil || m.State() != "closed" {
		t.Errorf("self-loop: state %s, err %v", m.State(), err)
	}
	if m.Can("close") || !m.Can("open") {
		t.Error("Can disagrees with the table")
	}
}

func TestRestoreRejectsUnknownState(t *testing.T) {
	tb := door(t)
	if _, err := tb.Restore("ajar"); err == nil {
		t.Fatal("restored an unknown state")
	}
	m, err := tb.Restore("opened")
	if err != nil || m.State() != "opened" {
		t.Fatalf("restore: %v %v", m.State(), err)
	}
}

func TestNewTableRejectsBadSpecs(t *testing.T) {
	cases := map[string]fsmkit.Spec[st, ev]{
		"duplicate event from one state": {Name: "x", Initial: "a", Transitions: []fsmkit.Transition[st, ev]{
			{Event: "go", Src: []st{"a"}, Dst: "b"}, {Event: "go", Src: []st{"a"}, Dst: "c"}}},
		"final with outgoing edge": {Name: "x", Initial: "a", Final: []st{"a"}, Transitions: []fsmkit.Transition[st, ev]{
			{Event: "go", Src: []st{"a"}, Dst: "b"}}},
		"final never entered": {Name: "x", Initial: "a", Final: []st{"z"}, Transitions: []fsmkit.Transition[st, ev]{
			{Event: "go", Src: []st{"a"}, Dst: "b"}}},
		"no name":       {Initial: "a"},
		"no initial":    {Name: "x"},
		"empty source":  {Name: "x", Initial: "a", Transitions: []fsmkit.Transition[st, ev]{{Event: "go", Dst: "b"}}},
		"empty event":   {Name: "x", Initial: "a", Transitions: []fsmkit.Transition[st, ev]{{Src: []st{"a"}, Dst: "b"}}},
		"empty destiny": {Name: "x", Initial: "a", Transitions: []fsmkit.Transition[st, ev]{{Event: "go", Src: []st{"a"}}}},
	}
	for name, spec := range cases {
		if _, err := fsmkit.NewTable(spec); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestMermaidIsLooplabRenderingPlusFinalMarkers(t *testing.T) {
	want := `stateDiagram-v2
    [*] --> closed
    closed --> closed: knock
    closed --> opened: open
    closed --> gone: remove
    opened --> closed: close
    opened --> gone: remove
    gone --> [*]
`
	if d := cmp.Diff(want, door(t).Mermaid()); d != "" {
		t.Errorf("Mermaid (-want +got):\n%s", d)
	}
}

func TestParseMermaidRoundTripsRenderedTables(t *testing.T) {
	tb := door(t)
	got, err := fsmkit.ParseMermaid(tb.Mermaid())
	if err != nil {
		t.Fatal(err)
	}
	key := func(es []fsmkit.Edge) map[fsmkit.Edge]int {
		m := map[fsmkit.Edge]int{}
		for _, e := range es {
			m[e]++
		}
		return m
	}
	if d := cmp.Diff(key(tb.Edges()), key(got)); d != "" {
		t.Errorf("parsed edges differ from the table's (-table +parsed):\n%s", d)
	}
}

func TestParseMermaidSeedSyntax(t *testing.T) {
	got, err := fsmkit.ParseMermaid("stateDiagram-v2\n    [*] --> requested      : remote_spawn tool / spawn frame\n\n    %% comment\n    a --> b\n    stopped --> [*]\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []fsmkit.Edge{
		{Src: "[*]", Dst: "requested", Label: "remote_spawn tool / spawn frame"},
		{Src: "a", Dst: "b"},
		{Src: "stopped", Dst: "[*]"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	for _, bad := range []string{"a -> b", "a b --> c", "--> c", "a --> "} {
		if _, err := fsmkit.ParseMermaid(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func TestMermaidBlockFindsTheBlockUnderAHeading(t *testing.T) {
	md := "# T\n## 1. One\n```mermaid\nx --> y\n```\n## 2. Two\ntext\n```mermaid\na --> b\n```\n"
	got, err := fsmkit.MermaidBlock(md, "## 2.")
	if err != nil || got != "a --> b\n" {
		t.Fatalf("got %q, %v", got, err)
	}
	if _, err := fsmkit.MermaidBlock(md, "## 3."); err == nil {
		t.Error("found a missing heading")
	}
	if _, err := fsmkit.MermaidBlock("## 1\n```mermaid\na --> b\n", "## 1"); err == nil || !strings.Contains(err.Error(), "unterminated") {
		t.Errorf("unterminated block: %v", err)
	}
}

func FuzzParseMermaid(f *testing.F) {
	f.Add("stateDiagram-v2\n    [*] --> a\n    a --> b: go\n")
	f.Add("a --> b : x : y\n%% c\n")
	f.Fuzz(func(t *testing.T, s string) {
		edges, err := fsmkit.ParseMermaid(s)
		if err != nil {
			return
		}
		for _, e := range edges {
			if e.Src == "" || e.Dst == "" {
				t.Fatalf("empty endpoint in %+v", e)
			}
		}
	})
}
