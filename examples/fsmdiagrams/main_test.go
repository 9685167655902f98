package main

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"example.com/pifleet/internal/fsmkit"
)

var update = flag.Bool("update", false, "rewrite docs/state-machines.md")

const doc = "../../docs/state-machines.md"

func TestDocumentIsGeneratedFromTheTables(t *testing.T) {
	var out bytes.Buffer
	if err := render(&out); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(doc, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(doc)
	if err != nil {
		t.Fatalf("%v (run go test ./examples/fsmdiagrams -update)", err)
	}
	if d := cmp.Diff(strings.Split(string(want), "\n"), strings.Split(out.String(), "\n")); d != "" {
		t.Errorf("%s is stale; run go test ./examples/fsmdiagrams -update (-doc +generated):\n%s", doc, d)
	}
}

func TestEveryMachineRendersParseableEdges(t *testing.T) {
	var out bytes.Buffer
	if err := render(&out); err != nil {
		t.Fatal(err)
	}
	for _, m := range machines() {
		block, err := fsmkit.MermaidBlock(out.String(), "## "+m.Name())
		if err != nil {
			t.Fatalf("%s: %v", m.Name(), err)
		}
		edges, err := fsmkit.ParseMermaid(block)
		if err != nil || len(edges) == 0 {
			t.Errorf("%s: %d edges, %v", m.Name(), len(edges), err)
		}
	}
}
