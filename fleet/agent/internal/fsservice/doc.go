// Package fsservice is the agent's read-only file service: it answers the
// fs_read, fs_list, fs_grep and fs_diff frames for one worker instance,
// scoped to that instance's working directory (reference 1.16, checklist
// 2.10, AC-3.4a–d).
//
// A Service is rooted at the cwd given at spawn. Every answer is a single
// *transport.FsResultFrame with done:true; a failure is carried in its error
// field with one of the Code values, which ResultError turns back into an
// errors.Is-able *Error.
//
// # Containment
//
// A requested path is resolved the way the reference does it: the root is
// realpath'd, the candidate is resolved against it (an absolute candidate
// stays absolute), the deepest existing ancestor is realpath'd and the
// missing tail re-appended, and the result must be the root or lie under
// root + separator, else path_escape. Symlinks that point outside the root
// are therefore refused. On top of that check the file is opened through an
// os.Root, so a symlink swapped in between the check and the open still
// cannot lead outside the root.
//
// # Limits
//
// Text pages hold at most MaxPageLines lines and MaxPageBytes bytes; images
// at most MaxImageBytes. Unlike the reference, a text file is never read
// whole: lines are streamed, reading stops as soon as the page is full, and
// no request reads more than the read limit (WithReadLimit) from a file.
//
// # Differences from the TypeScript agent (documented pifleet choices)
//
//   - Access mode off (WithAccess(AccessOff)) answers every request with
//     code fs_disabled. The reference has no such switch (AC-3.4a).
//   - Cuts at MaxPageBytes land on a UTF-8 rune boundary, so a cut never
//     produces a replacement character; invalid bytes in the file itself
//     become U+FFFD, one per invalid byte.
//   - A text page whose offset lies beyond the read limit is answered
//     too_large instead of reading an unbounded amount of the file.
//   - fs_list entries are sorted by name (byte order). A symlink's size is
//     reported only when its target lies inside the root.
//   - fs_grep patterns are Go RE2 regular expressions, not JavaScript ones:
//     no backreferences or lookaround (such patterns are bad_pattern), and
//     "." also matches CR and U+2028/U+2029. The 300-character snippet
//     counts runes, not UTF-16 units. truncated is set only when a match
//     beyond the 200th exists, and the whole answer is also capped at
//     MaxGrepBytes.
//   - fs_diff refuses a ref that starts with "-" (git_failed, no git run)
//     and passes "--" after the ref; git runs with --no-color and
//     --no-ext-diff and GIT_OPTIONAL_LOCKS=0 (a read never takes the index
//     lock). Only the first MaxPageBytes of output are kept: git is stopped
//     once more arrived, so an output larger than 8 MiB is a truncated page
//     rather than a failure. A revParse answer is trimmed of its trailing
//     newline.
//   - Failures other than "missing" (permission denied, I/O errors) are
//     io_error, and a request whose context ends is answered canceled.
package fsservice
