package fleet

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"example.com/pifleet/transport"
	"example.com/pifleet/transport/trust"
)

// CacheCheck is the verdict on one bundle of an agent's bundle cache: the
// version its name points at was re-hashed on the agent's machine against
// its manifest.
type CacheCheck struct {
	// Bundle is the bundle name; BundleHash the version verified ("" when
	// its pointer could not be read).
	Bundle, BundleHash string
	// OK says every file is intact.
	OK bool
	// Code and Message say what is wrong when not OK: not_cached,
	// invalid_bundle, bad_pointer (the pointer file is damaged), corrupt (files differ
	// from the manifest, or the version is gone), cache_failed (the cache
	// could not be read).
	Code, Message string
	// Problems names corrupt files with the reason (at most 20; Message
	// counts them all).
	Problems []CacheProblem
}

// CacheProblem is one damaged file of a cached bundle.
type CacheProblem struct {
	// Path is the file's path in the bundle; Reason what is wrong with it
	// (missing, a size or content mismatch, not in the manifest …).
	Path, Reason string
}

// VerifyCaches asks agent machine to re-hash every bundle of its bundle
// cache (cache_verify) and returns one CacheCheck per bundle, in name
// order: a corrupt cache on a worker machine would otherwise surface
// only as a failing spawn. An agent that does not announce the
// cache-verify capability (a TypeScript agent, an older pifleet one)
// gives ErrNotSupported.
func (f *Fleet) VerifyCaches(ctx context.Context, machine string) ([]CacheCheck, error) {
	f.mu.lockAgents()
	a, c, err := f.connForLocked(machine, trust.OpView)
	if err == nil && (!a.pifleet || !a.announces(transport.CapabilityCacheVerify)) {
		err = fmt.Errorf("%w: %s (cache_verify)", ErrNotSupported, machine)
	}
	f.mu.Unlock()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, f.requestTimeout())
	defer cancel()
	ans, err := c.Request(ctx, &transport.CacheVerifyFrame{})
	if err != nil {
		return nil, err
	}
	r, ok := ans.(*transport.CacheVerifyResultFrame)
	if !ok {
		return nil, wrongAnswer("cache_verify", (*transport.CacheVerifyResultFrame)(nil), ans)
	}
	out := make([]CacheCheck, 0, len(r.Bundles))
	for _, b := range r.Bundles {
		ch := CacheCheck{Bundle: b.Name, BundleHash: b.BundleHash, OK: b.OK}
		if b.Error != nil {
			ch.OK, ch.Code, ch.Message = false, b.Error.Code, b.Error.Message
		}
		for _, p := range b.Problems {
			ch.Problems = append(ch.Problems, CacheProblem{Path: p.Path, Reason: p.Reason})
		}
		out = append(out, ch)
	}
	slices.SortFunc(out, func(x, y CacheCheck) int { return strings.Compare(x.Bundle, y.Bundle) })
	return out, nil
}
