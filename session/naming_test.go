package session

import (
	"errors"
	"strings"
	"testing"
)

func TestKindOf(t *testing.T) {
	for name, want := range map[string]Kind{
		"baseline:api": KindBaseline, "task:t1:x": KindTask, "": KindScratch,
		"Baseline:api": KindScratch, "my task:": KindScratch, "task:": KindTask,
	} {
		if got := KindOf(name); got != want {
			t.Errorf("KindOf(%q) = %s, want %s", name, got, want)
		}
	}
}

func TestSlugify(t *testing.T) {
	tests := map[string]string{
		"Fix the failing tests":   "fix-the-failing-tests",
		"  --Fix   THE tests!!  ": "fix-the-tests",
		"Répare café_bug #42":     "r-pare-caf-bug-42",
		"日本語":                     "",
		"":                        "",
		"a-very-long-title-that-keeps-going-and-going-beyond-the-limit-of-slugs": "a-very-long-title-that-keeps-going-and-going",
		strings.Repeat("x", 100): strings.Repeat("x", MaxSlugLen),
	}
	for in, want := range tests {
		got := Slugify(in)
		if got != want {
			t.Errorf("Slugify(%q) = %q, want %q", in, got, want)
		}
		if len(got) > MaxSlugLen || Slugify(got) != got {
			t.Errorf("Slugify(%q) = %q: too long or not a fixed point", in, got)
		}
	}
}

func TestNamesRoundTrip(t *testing.T) {
	b, err := BaselineName(" api ")
	if err != nil || b != "baseline:api" {
		t.Fatalf("BaselineName = %q, %v", b, err)
	}
	if p, err := ParseName(b); err != nil || p != (ParsedName{Kind: KindBaseline, Repo: "api"}) {
		t.Errorf("ParseName(%q) = %+v, %v", b, p, err)
	}
	n, err := TaskName("t42", "Fix the failing tests")
	if err != nil || n != "task:t42:fix-the-failing-tests" {
		t.Fatalf("TaskName = %q, %v", n, err)
	}
	if p, err := ParseName(n); err != nil || p != (ParsedName{Kind: KindTask, TaskID: "t42", Slug: "fix-the-failing-tests"}) {
		t.Errorf("ParseName(%q) = %+v, %v", n, p, err)
	}
	if n, _ := TaskName("t1", "!!!"); n != "task:t1:untitled" {
		t.Errorf("TaskName without letters = %q", n)
	}
	if p, err := ParseName("my notes"); err != nil || p.Kind != KindScratch {
		t.Errorf("scratch: %+v, %v", p, err)
	}
}

func TestBadNames(t *testing.T) {
	bad := []func() error{
		func() error { _, err := BaselineName("  "); return err },
		func() error { _, err := BaselineName("a\nb"); return err },
		func() error { _, err := TaskName("", "x"); return err },
		func() error { _, err := TaskName("t:1", "x"); return err },
		func() error { _, err := TaskName("t 1", "x"); return err },
		func() error { _, err := ParseName("baseline:"); return err },
		func() error { _, err := ParseName("task::slug"); return err },
		func() error { _, err := ParseName("task: x:slug"); return err },
	}
	for i, f := range bad {
		if err := f(); !errors.Is(err, ErrInvalidName) {
			t.Errorf("case %d: %v, want ErrInvalidName", i, err)
		}
	}
}
