// Package pathsafe decides whether a path taken from a bundle manifest, or
// received over the wire, may touch a file system.
//
// Manifest paths are relative POSIX paths ("skills/review/SKILL.md"). A path
// must be safe on every operating system a worker may run, so the rules
// refuse what any of them would misread:
// backslashes, drive letters, characters Windows forbids, "." and ".."
// segments, segments ending in a dot or a space, and the device names of
// Windows (CON, NUL, COM1 …). A set of paths is also refused when two of them
// differ only in case, because they would land on the same file on macOS and
// Windows; case is folded exactly as JavaScript's String.prototype.toLowerCase
// does, so that a Go and a TypeScript peer agree on every set.
//
// Check validates one path, CheckSet a whole manifest (reporting every
// problem, not just the first), Join turns a validated path into a native one
// under a root, and Within resolves a path under a root, symbolic links
// included, and refuses it when it escapes.
package pathsafe
