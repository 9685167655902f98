// Package cache keeps bundles on a worker machine and syncs them from a
// registry.
//
// Layout, shared with the TypeScript worker:
//
//	<root>/<bundleHash>/...        one complete version of a bundle
//	<root>/by-name/<name>.json     {"bundleHash":…,"manifest":…}: the version a name last synced to
//	<root>/.sync-*                 work in progress (staging), removed when abandoned
//
// Sync drives the bundle-sync machine (SyncTable): fetch the manifest,
// reuse the cached version or build the new one from the previous
// version's unchanged files plus the changed ones fetched in parallel,
// verify everything, and make it visible with one rename. It degrades to
// the cached copy when the registry is unavailable, and fails fast, naming
// the registry and the bundle, when there is none.
//
// A sync can be killed at any instant (kill -9 included): a version
// directory only ever appears complete, the pointer is replaced
// atomically, and the next sync removes what the dead one left.
//
// On Linux, Open marks the root as the top of directory hierarchies
// (chattr +T, where the file system has the attribute), so that ext4 puts
// each new version's files away from the block groups where other programs
// churn temporary files: without a journal, creating a file in such a
// group costs up to a millisecond.
//
// Verify re-hashes a cached version (for doctor); Result.Manifest's
// CheckPlatform tells whether the bundle runs on this machine before any
// process starts.
package cache
