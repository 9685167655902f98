// Package auth proves, on every connection between a server and an agent,
// that the peer holds its Ed25519 key — so that only the server process
// commands an agent, not every user of the server's machine, and only the
// agent process speaks for its machine.
//
// The agent sends its hello with a fresh challenge and then waits for the
// server's hello, which carries the server's own challenge and one proof
// per key it holds: an Ed25519 signature over the connection's
// Transcript (both challenges, the direction, the agent's machine name,
// both TCP endpoints, the signer's role and key). The agent checks it
// against the keys it trusts before it sends or processes anything else
// (AgentHandshake); then it answers with its own proof (an auth_proof
// frame) over the same transcript, which a server checks for agents that
// dial in. docs/protocol.md explains the design and the attacks it stops.
//
// Keys live in PEM files of PKCS #8 blocks (KeyRing): the current key and
// the keys it replaced, honoured until their grace period ends (Rotate).
package auth
