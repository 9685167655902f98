// Package jsonscan is pifleet's one JSON scanner: a validating scanner over
// raw bytes that the project's three JSON readers are thin front ends of.
//
//   - transport decodes protocol frames: it splits a record into its
//     members (Scanner.AppendMembers) and picks each frame's fields out of
//     them;
//   - transport/pirpc parses pi's RPC records the same way, and walks
//     members of lines it has validated already without checking them again
//     (AppendValidMembers, NextElement);
//   - internal/jsjson builds JavaScript-exact values (bundle manifests, whose
//     bundleHash depends on every byte) from bytes the scanner validated.
//
// encoding/json spends most of a record's decode time on reflection and a
// second validation pass; these readers need only "is this valid JSON",
// "where are the members" and "give me this string or number", which one
// pass over the bytes answers. The grammar is RFC 8259's, which is what
// JavaScript's JSON.parse and encoding/json accept; the differential fuzz
// targets of this package hold all three front ends to encoding/json.
//
// The scanner is iterative (an explicit stack of open containers), so a
// hostile record nested a million levels deep costs at most one byte of
// heap per level and never the goroutine stack.
package jsonscan
