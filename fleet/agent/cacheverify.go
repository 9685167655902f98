package agent

import (
	"context"
	"errors"
	"io/fs"

	"example.com/pifleet/bundle"
	"example.com/pifleet/bundle/cache"
	"example.com/pifleet/transport"
)

// Error codes of a cache_verify_result's bundle entries, besides
// CodeInvalidBundle (the bundle asked for is not a valid name).
const (
	// CodeNotCached: the bundle asked for has no pointer in the cache.
	CodeNotCached = "not_cached"
	// CodeBadPointer: the bundle's pointer file is damaged, or names
	// another bundle.
	CodeBadPointer = "bad_pointer"
	// CodeCorrupt: files of the version the pointer names differ from its
	// manifest, or the version's directory is gone.
	CodeCorrupt = "corrupt"
	// CodeCacheFailed: the cache could not be read (permissions, I/O).
	CodeCacheFailed = "cache_failed"
)

// maxReportedProblems caps the files named per bundle, so that a cache
// damaged wholesale still fits one frame; the error's message counts
// them all.
const maxReportedProblems = 20

// cacheVerify answers cache_verify: every bundle of the cache (or the one
// asked for) is re-hashed against its manifest, one bundle at a time (the
// hashing of one bundle already uses every core). A connection that goes
// away stops the work between bundles, and gets no answer.
func (a *Agent) cacheVerify(ctx context.Context, f *transport.CacheVerifyFrame) transport.Frame {
	out := &transport.CacheVerifyResultFrame{Bundles: []transport.BundleCheck{}}
	out.ID = f.ID
	names := []string{f.Bundle}
	if f.Bundle == "" {
		var err error
		if names, err = a.cache.Names(); err != nil {
			return errorFrame(f, CodeInternal, err.Error())
		}
	}
	for _, name := range names {
		if ctx.Err() != nil {
			return nil
		}
		out.Bundles = append(out.Bundles, verifyCached(a.cache, name, f.Bundle != ""))
	}
	return out
}

// verifyCached checks the version bundle name points at. asked says the
// server named the bundle: then a missing one is reported not_cached
// rather than having vanished since the listing.
func verifyCached(c *cache.Cache, name string, asked bool) transport.BundleCheck {
	check := transport.BundleCheck{Name: name}
	fail := func(code string, err error) transport.BundleCheck {
		check.Error = &transport.FsError{Code: code, Message: err.Error()}
		return check
	}
	p, err := c.Pointer(name)
	var nameErr *bundle.NameError
	var manifestErr *bundle.ManifestError
	switch {
	case errors.As(err, &nameErr):
		return fail(CodeInvalidBundle, err)
	case errors.Is(err, fs.ErrNotExist):
		if asked {
			return fail(CodeNotCached, errors.New("bundle "+name+" is not in the cache"))
		}
		// Listed a moment ago and gone now: nothing left to be corrupt
		// (no sync removes a pointer; someone cleaned the cache).
		return fail(CodeNotCached, errors.New("bundle "+name+" left the cache while it was verified"))
	case errors.As(err, &manifestErr):
		return fail(CodeBadPointer, err)
	case err != nil:
		return fail(CodeCacheFailed, err)
	case p.Manifest.Name != name:
		return fail(CodeBadPointer, errors.New("the pointer of bundle "+name+" names bundle "+p.Manifest.Name))
	}
	check.BundleHash = p.BundleHash
	// Verify, not VerifyBundle: the hash reported must be the version
	// verified, and a sync may move the pointer between two reads.
	err = c.Verify(p.Manifest)
	var corrupt *cache.CorruptError
	switch {
	case err == nil:
		check.OK = true
		return check
	case errors.As(err, &corrupt):
		for _, pr := range corrupt.Problems[:min(len(corrupt.Problems), maxReportedProblems)] {
			check.Problems = append(check.Problems, transport.CacheProblem{Path: pr.Path, Reason: pr.Reason})
		}
		return fail(CodeCorrupt, err)
	case errors.Is(err, fs.ErrNotExist):
		return fail(CodeCorrupt, err)
	default:
		return fail(CodeCacheFailed, err)
	}
}
