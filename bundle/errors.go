package bundle

import (
	"fmt"
	"strings"

	"example.com/pifleet/bundle/pathsafe"
)

// ErrorCode is a protocol error code of bundle provisioning, as the
// spawn_error frame carries it (docs/protocol.md). ErrorCode values are errors themselves, so errors.Is(err,
// CodeUnsafePath) tells what went wrong with any error of the bundle
// packages, whichever type carries the details.
type ErrorCode string

// Error returns the code itself.
func (c ErrorCode) Error() string { return string(c) }

// The codes. A sync fails with unsafe_path, invalid_manifest,
// hash_mismatch or fetch_failed; a registry client with unreachable,
// not_found or invalid_manifest.
const (
	CodeUnsafePath      ErrorCode = "unsafe_path"
	CodeInvalidManifest ErrorCode = "invalid_manifest"
	CodeHashMismatch    ErrorCode = "hash_mismatch"
	CodeFetchFailed     ErrorCode = "fetch_failed"
	CodeUnreachable     ErrorCode = "unreachable"
	CodeNotFound        ErrorCode = "not_found"
)

// FieldError is one problem with one field of a document. Field is a
// JavaScript-style accessor ("files[3].sha256", "model.primary.id").
type FieldError struct {
	Field  string
	Reason string
}

// String returns "field: reason".
func (e FieldError) String() string { return e.Field + ": " + e.Reason }

// ManifestError reports a manifest that does not follow the manifest v1
// schema. It lists every problem found. errors.Is(err, CodeInvalidManifest)
// is true.
type ManifestError struct {
	Problems []FieldError
}

func (e *ManifestError) Error() string { return "invalid manifest: " + joinProblems(e.Problems) }

// Is makes errors.Is(err, CodeInvalidManifest) true.
func (e *ManifestError) Is(target error) bool { return target == CodeInvalidManifest }

func joinProblems(ps []FieldError) string {
	const shown = 5
	parts := make([]string, 0, shown)
	for _, p := range ps[:min(shown, len(ps))] {
		parts = append(parts, p.String())
	}
	s := strings.Join(parts, "; ")
	if n := len(ps) - shown; n > 0 {
		s += fmt.Sprintf("; and %d more", n)
	}
	return s
}

// UnsafePathsError reports a manifest, or a directory being built into one,
// whose file paths break the path-safety rules. errors.Is(err,
// CodeUnsafePath) and errors.Is(err, pathsafe.ErrUnsafe) are true, and
// errors.As reaches every *pathsafe.Error.
type UnsafePathsError struct {
	Err *pathsafe.SetError
}

func (e *UnsafePathsError) Error() string { return "bundle: " + e.Err.Error() }

// Unwrap returns the path-safety errors.
func (e *UnsafePathsError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, CodeUnsafePath) true.
func (e *UnsafePathsError) Is(target error) bool { return target == CodeUnsafePath }

// MetadataError reports a bundle.json that cannot describe a bundle: a
// malformed file, an unknown key, a value of the wrong type, or a resource
// path that is unsafe or names nothing in the bundle.
type MetadataError struct {
	// File is the bundle.json path, when the metadata came from a file.
	File     string
	Problems []FieldError
}

func (e *MetadataError) Error() string {
	where := "bundle metadata"
	if e.File != "" {
		where = e.File
	}
	return where + ": " + joinProblems(e.Problems)
}

// NameError reports a bundle name outside ^[A-Za-z0-9][A-Za-z0-9._-]*$.
type NameError struct {
	Name string
}

func (e *NameError) Error() string {
	return fmt.Sprintf("invalid bundle name %q: want a letter or digit, then letters, digits, '.', '_' or '-'", e.Name)
}

// PlatformError reports a bundle that does not support the platform it is
// about to run on.
type PlatformError struct {
	Bundle    string
	Platform  string
	Supported []string
}

func (e *PlatformError) Error() string {
	return fmt.Sprintf("bundle %q supports platforms %s, not %s", e.Bundle, strings.Join(e.Supported, ", "), e.Platform)
}

// HashPinError reports a pinned bundleHash that is not the version the
// registry serves. errors.Is(err, CodeHashMismatch) is true.
type HashPinError struct {
	Bundle string
	// Pinned is the hash asked for; Served the registry's.
	Pinned, Served string
}

func (e *HashPinError) Error() string {
	return fmt.Sprintf("bundle %q hash mismatch: pinned %s, the registry serves %s", e.Bundle, e.Pinned, e.Served)
}

// Is makes errors.Is(err, CodeHashMismatch) true.
func (e *HashPinError) Is(target error) bool { return target == CodeHashMismatch }
