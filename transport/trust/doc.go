// Package trust decides which machines may do what in a pifleet fleet.
//
// Two sides, two rules:
//
// The server keeps a Policy per machine — allow (may be viewed and spawned
// on, not steered), steer (full control) or deny — in a Store backed by
// bbolt. An inbound connection passes ServerGate before any frame: whois
// says who it is, and Store.Decide returns the stored policy or, for a
// machine seen for the first time, asks a Prompter exactly once and stores
// the answer, deny included. Operations on an
// admitted machine are checked with Check. The CLI's `trust list` and
// `trust set MACHINE allow|steer|deny` map to Store.List and Store.Set.
//
// The agent obeys one server: its Pin. Pin.Admit lets in the pinned
// machine (and user, when pinned) and refuses everyone else, and anyone
// whois cannot vouch for, before a byte is sent.
//
// Everything refused is a *RefusedError (errors.Is(err, ErrRefused)) with
// the cause wrapped, so callers close first and log the reason.
package trust
