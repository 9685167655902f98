package cache

import (
	"fmt"
	"strings"

	"example.com/pifleet/bundle"
)

// CodeCacheFailed reports a cache that could not be written or read (a
// full disk, permissions). It is a pifleet addition to the protocol's sync
// codes, which assume a working disk.
const CodeCacheFailed bundle.ErrorCode = "cache_failed"

// SyncError reports a sync that ended in fail_fast. errors.Is(err, code)
// is true for its Code: bundle.CodeUnsafePath, CodeInvalidManifest,
// CodeHashMismatch, CodeFetchFailed, CodeUnreachable or CodeNotFound (the
// registry is down and nothing is cached), or CodeCacheFailed. Unwrap
// gives the cause (a *registry.Error, a *PinError, a context error …).
type SyncError struct {
	Code bundle.ErrorCode
	// Bundle and Registry say what was synced from where.
	Bundle, Registry string
	// Path is the bundle file concerned, if one is.
	Path string
	// State is the state the sync failed in.
	State SyncState
	Err   error
}

func (e *SyncError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sync of bundle %q from %s failed in %s: %s", e.Bundle, e.Registry, e.State, e.Code)
	if e.Path != "" {
		fmt.Fprintf(&b, " (file %q)", e.Path)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *SyncError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, e.Code) true.
func (e *SyncError) Is(target error) bool {
	c, ok := target.(bundle.ErrorCode)
	return ok && c == e.Code
}

// PinError reports a bundle whose version is not the pinned one.
type PinError struct {
	Bundle, Pinned, Got string
	// Degraded is set when the registry was unavailable and the version
	// refused is the cached one.
	Degraded bool
}

func (e *PinError) Error() string {
	if e.Degraded {
		return fmt.Sprintf("bundle %q hash mismatch: pinned %s, the cached copy is %s (registry unavailable)", e.Bundle, e.Pinned, e.Got)
	}
	return fmt.Sprintf("bundle %q hash mismatch: pinned %s, registry serves %s", e.Bundle, e.Pinned, e.Got)
}

// Problem is one thing wrong with a cached bundle.
type Problem struct {
	Path   string
	Reason string
}

// CorruptError reports a cached bundle whose files are not those of its
// manifest (see Cache.Verify).
type CorruptError struct {
	Bundle, BundleHash, Dir string
	Problems                []Problem
}

func (e *CorruptError) Error() string {
	const shown = 5
	parts := make([]string, 0, shown)
	for _, p := range e.Problems[:min(shown, len(e.Problems))] {
		parts = append(parts, fmt.Sprintf("%s: %s", p.Path, p.Reason))
	}
	more := ""
	if n := len(e.Problems) - shown; n > 0 {
		more = fmt.Sprintf("; and %d more", n)
	}
	return fmt.Sprintf("cached bundle %q (%s) at %s is corrupt: %s%s", e.Bundle, e.BundleHash, e.Dir, strings.Join(parts, "; "), more)
}
