// Package bundle describes what a pi worker is provisioned with: a bundle,
// a directory of files (extensions, skills, prompts …) plus metadata, and
// its manifest v1, shared byte for byte with the TypeScript pi-fleet.
//
// A bundle's source directory holds its files and, at its root, a
// bundle.json with the metadata (platforms, extensions, skills, prompts,
// tools, model, review, budget, ui). Build (or BuildDir) walks the regular
// files, hashes them and returns the Manifest; Encode writes it as
// manifest.json (tab-indented JSON and a line feed, identical on every
// platform). The bundleHash identifies a version by its files alone: see
// Hash, which sorts paths in JavaScript's UTF-16 order so both
// implementations agree.
//
// ParseManifest reads a manifest from a registry and validates everything:
// the schema (every problem named by field), the path safety of every file
// (package pathsafe), and that the bundleHash matches the files.
//
// The packages below this one do the rest: registry publishes and serves
// bundles, cache syncs them onto a worker machine (the bundle-sync state
// machine), rebundle switches a running worker to another bundle.
//
// Errors carry the protocol's codes: errors.Is(err, CodeUnsafePath),
// CodeInvalidManifest, CodeHashMismatch, CodeFetchFailed, CodeUnreachable,
// CodeNotFound.
package bundle
