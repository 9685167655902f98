//go:build unix

package agent

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"example.com/pifleet/bundle/cache"
	"example.com/pifleet/transport"
)

// cache_verify re-hashes the bundles a spawn cached: intact at first; a
// damaged and a deleted file are then named with their reasons, and a
// bundle asked for by name is verified alone.
func TestCacheVerify(t *testing.T) {
	h := newHarness(t, hopts{})
	c := h.dial(t)
	if hello := c.hello(); !slices.Contains(hello.Capabilities, transport.CapabilityCacheVerify) {
		t.Errorf("hello does not announce %s: %v", transport.CapabilityCacheVerify, hello.Capabilities)
	}
	ask := func(id, bundle string) []transport.BundleCheck {
		t.Helper()
		f := &transport.CacheVerifyFrame{Bundle: bundle}
		f.ID = id
		c.send(f)
		r, ok := c.reply(id).(*transport.CacheVerifyResultFrame)
		if !ok {
			t.Fatalf("cache_verify %s not answered with cache_verify_result", id)
		}
		return r.Bundles
	}
	if got := ask("empty", ""); len(got) != 0 {
		t.Fatalf("nothing cached yet, got %+v", got)
	}

	inst := c.mustSpawn("s1", h.cwd, "default", nil)
	want := []transport.BundleCheck{{Name: "default", BundleHash: inst.BundleHash, OK: true}}
	if d := cmp.Diff(want, ask("intact", "")); d != "" {
		t.Fatalf("intact cache (-want +got):\n%s", d)
	}

	dir := filepath.Join(h.a.cache.Root(), inst.BundleHash)
	skill := filepath.Join(dir, "skills", "review", "SKILL.md")
	data, err := os.ReadFile(skill)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-2] ^= 0x20 // same size, other content
	if err := os.WriteFile(skill, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "prompts", "fix.md")); err != nil {
		t.Fatal(err)
	}
	got := ask("corrupt", "")
	if len(got) != 1 || got[0].OK || got[0].Error == nil || got[0].Error.Code != CodeCorrupt || got[0].BundleHash != inst.BundleHash {
		t.Fatalf("corrupt cache: %+v", got)
	}
	wantProblems := []transport.CacheProblem{
		{Path: "prompts/fix.md", Reason: "missing"},
		{Path: "skills/review/SKILL.md", Reason: "content does not match its hash"},
	}
	if d := cmp.Diff(wantProblems, got[0].Problems); d != "" {
		t.Errorf("problems (-want +got):\n%s", d)
	}
	for _, p := range wantProblems {
		if !strings.Contains(got[0].Error.Message, p.Path) {
			t.Errorf("message does not name %s: %s", p.Path, got[0].Error.Message)
		}
	}

	// A damaged pointer is told apart from damaged files; a bundle asked
	// for alone is the only one verified.
	ptrDir := filepath.Join(h.a.cache.Root(), cache.PointerDir)
	if err := os.WriteFile(filepath.Join(ptrDir, "broken.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	codes := func(checks []transport.BundleCheck) map[string]string {
		m := map[string]string{}
		for _, ch := range checks {
			if ch.Error != nil {
				m[ch.Name] = ch.Error.Code
			} else {
				m[ch.Name] = "ok"
			}
		}
		return m
	}
	if d := cmp.Diff(map[string]string{"broken": CodeBadPointer, "default": CodeCorrupt}, codes(ask("all", ""))); d != "" {
		t.Errorf("all bundles (-want +got):\n%s", d)
	}
	for bundle, code := range map[string]string{"broken": CodeBadPointer, "plain": CodeNotCached, "../x": CodeInvalidBundle} {
		if d := cmp.Diff(map[string]string{bundle: code}, codes(ask("one-"+bundle, bundle))); d != "" {
			t.Errorf("cache_verify {bundle:%q} (-want +got):\n%s", bundle, d)
		}
	}
}
