// Package identity tells who is at the other end of a connection.
//
// pifleet carries no tokens and no secrets: a peer is identified by the
// network it reaches us through. On a tailnet, tailscaled knows which
// machine and which user own every address, because WireGuard keys cannot
// be forged inside the tailnet; Tailscale asks it through the `tailscale`
// CLI (`tailscale whois --json <ip>`). Static maps fixed addresses to
// identities for loopback development and tests, where no tailscaled runs;
// binaries must warn loudly when it is in force (see IsStatic).
//
// Both implement Whois, the one question the rest of pifleet asks: which
// Identity is behind this address? Answers are strict: an address nobody
// vouches for, an answer missing its machine or user, a CLI that fails or
// hangs past its timeout are all errors, and callers treat any error as
// "deny" (see package trust).
//
// Tailscale also reports the machine's own tailnet IPv4 (IPv4, which the
// agent binds) and the tailnet's peers (Status, which the server uses to
// discover agents).
//
// Cache sits in front of any Whois for a caller that asks about the same
// peers over and over (the bundle registry asks for every request): one
// lookup per address, shared by concurrent questions and reused for a
// short, documented lifetime.
//
// Differences from the TypeScript pi-fleet wrapper, on purpose:
//   - every CLI call has a timeout (DefaultTimeout unless configured);
//   - when whois reports no ComputedName, the machine is the short host
//     name of Node.Name ("buildbox" for "buildbox.tail1234.ts.net."), so
//     that both paths name a machine the same way; the TypeScript code used
//     the raw DNS name with its trailing dot, which no pin could match.
package identity
