package fsmtest

import (
	"bytes"
	"strings"
	"testing"

	"example.com/pifleet/internal/fsmkit"
	"example.com/pifleet/internal/fsmkit/internal/doordriver"
)

func TestTraceCheck(t *testing.T) {
	fsmkit.EnableTrace()
	doordriver.Drive("open", "close", "close") // knock never fired; close stale once

	var out bytes.Buffer
	tr := &Trace{out: &out, checks: Checks{Cover: []Coverage{Cover(doordriver.Table)}}}
	if !tr.coverage(tr.checks.Cover[0]) || !strings.Contains(out.String(), "door edge closed --knock--> closed is never fired") {
		t.Errorf("an unfired edge passed: %q", out.String())
	}

	out.Reset()
	tr.checks.Cover[0] = Cover(doordriver.Table,
		Unfired{Src: "closed", Event: "knock", Dst: "closed", Reason: "known"},
		Unfired{Src: "closed", Event: "open", Dst: "opened", Reason: "known, but fired now"})
	if tr.coverage(tr.checks.Cover[0]) {
		t.Errorf("a known unfired edge failed: %q", out.String())
	}
	if !strings.Contains(out.String(), "door edge closed --open--> opened is fired now") {
		t.Errorf("a known edge that fires is not reported: %q", out.String())
	}

	out.Reset()
	tr.checks.Cover[0] = Cover(doordriver.Table, Unfired{Src: "opened", Event: "knock", Dst: "opened", Reason: "no such edge"})
	if !tr.coverage(tr.checks.Cover[0]) || !strings.Contains(out.String(), "door has no edge opened --knock--> opened") {
		t.Errorf("a known edge the table lacks passed: %q", out.String())
	}

	out.Reset()
	tr.checks.Cover = nil
	if code := tr.Check(0); code != 1 || !strings.Contains(out.String(), "door: close in state closed") {
		t.Errorf("a stale close: code %d, %q", code, out.String())
	}
	out.Reset()
	tr.checks.Provoked = []Late{{Machine: "door", Event: "close", Reason: "this test"}}
	if code := tr.Check(0); code != 0 {
		t.Errorf("a provoked stale close: code %d, %q", code, out.String())
	}
	if code := tr.Check(3); code != 3 {
		t.Errorf("the tests' own exit code is kept: %d", code)
	}
}

func TestLateInputSaysWhy(t *testing.T) {
	for _, l := range LateInput {
		if l.Machine == "" || l.Event == "" || l.State == "" || l.Reason == "" {
			t.Errorf("late input entry incomplete: %+v", l)
		}
	}
}
