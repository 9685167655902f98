package main

import (
	"bytes"
	"os"
	"testing"
)

// The quickstart embeds its own copy of the offline faux provider (go:embed
// cannot reach testdata/ outside this directory). The copy must stay the
// same file the real-pi tests use, so a fix in one is never missing from the
// other.
func TestEmbeddedFauxProviderMatchesTestdata(t *testing.T) {
	ours, err := os.ReadFile("bundle/extensions/faux-provider.ts")
	if err != nil {
		t.Fatal(err)
	}
	canonical, err := os.ReadFile("../../testdata/pi/faux-provider.ts")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ours, canonical) {
		t.Fatal("examples/quickstart/bundle/extensions/faux-provider.ts differs from testdata/pi/faux-provider.ts; copy the changed one over the other")
	}
}
