// Package session reads pi's session files and keeps the server's registry
// of them.
//
// # Session files
//
// pi (0.73.1) writes one JSONL file per session, version 3: a header line
// {"type":"session","version":3,"id":<uuid>,"timestamp","cwd","parentSession"?}
// and then one entry per line, each with a type, an id (8 hex characters), a
// parentId (null for the first) and a timestamp. The entries form a tree;
// the leaf, pi's current position, is the last entry appended, and a branch
// is an entry whose parent is not the line before it. The session's name
// lives in session_info entries (the last one wins), not in the header. The
// files sit under DefaultRoot, one directory per working directory.
//
// This package only reads them, and reads them the way a file that pi is
// appending to must be read:
//
//   - only complete, LF-terminated lines count: an unterminated last line is
//     pi mid-write, ignored now and read once complete (never an error);
//   - memory is bounded by the longest line, capped (DefaultMaxLineBytes,
//     WithMaxLineBytes) with ErrLineTooLong;
//   - Read and the entry cursor are strict: they must return every entry,
//     so a corrupt complete line is a *LineError naming its line number;
//   - Summarize and the Lister are tolerant: they count and skip a corrupt
//     line (Summary.Corrupt), because one bad line must never hide a
//     session; a file whose header cannot be read is reported in
//     Listing.Skipped and logged, never dropped silently.
//
// # What it offers
//
//   - Read, Summarize: a whole file (entries and Tree), or its name, leaf
//     and counts streamed.
//   - EntriesAfter and Cursor: the entries appended after a given entry
//     id, exactly once (pi 0.73.1 has no get_entries), with
//     ErrUnknownEntry when the id is gone so the caller reads afresh.
//   - Lister: every session under a root as wire SessionInfo, newest first,
//     cached by path, modification time and size; Paginate splits a listing
//     into pages for a paged sessions_report.
//   - Search: case-insensitive search of the raw files.
//   - Watcher: the created, changed and removed files, by polling, for
//     incremental sessions_reports.
//   - Projection and RegistryTable: the server's registry of every agent's
//     sessions and its reconciliation machine.
//   - BaselineName, TaskName, ParseName, KindOf: how sessions are named.
package session
