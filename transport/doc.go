// Package transport is the server ⇄ agent wire protocol of pifleet,
// version 1, wire-compatible with the TypeScript pi-fleet: typed frames,
// their validation, the JSONL codec, the connection (Conn), a connection
// kept up to one peer with reconnects (Redialer), and the accept side's
// gate (Server, Admit).
//
// # Frames
//
// Every frame type is a struct (HelloFrame, SpawnFrame, EventFrame, … 36
// in all) that embeds Header (id, traceId) and implements Frame. The
// envelope's "v" and "type" are written and checked by the codec. Field
// types follow the TypeScript schemas: JSON numbers are float64 (the peer
// is JavaScript, every integer up to 2^53 is exact), optional numbers and
// objects are pointers, raw JSON values (rpc.command, event.event) are
// json.RawMessage kept verbatim. The encoder applies the rules a
// TypeScript schema insists on: empty required arrays are written as [],
// required booleans always (false included), required raw and nullable
// fields as null when nil, and optional fields are left out when empty,
// never written as null.
//
// # Codec
//
// Decoder reads records split on LF only (U+2028 and U+2029 are ordinary
// characters), strips one trailing CR, skips empty records and caps a
// record at MaxFrameBytes; a longer one costs exactly one
// CodeFrameTooLarge error and is skipped as it streams in, with no more
// than MaxFrameBytes+1 bytes ever buffered. Each record goes through the
// protocol's checks in order: invalid_json, not_an_object,
// unknown_frame_type (checked before the version, so {"v":2,"type":"x"} is
// an unknown type), unsupported_version, schema_violation with a message
// naming the field ("invalid spawn frame at /bundle: must be string").
// A failing record is a *ProtocolError (errors.Is(err, CodeSchemaViolation)
// and so on) and decoding goes on; a caller never sees a partly valid
// frame. Unknown extra fields are allowed.
//
// Decoding does not use encoding/json: each record is validated and split
// into members in one pass, then the frame's fields are picked out of it.
// This is several times faster than encoding/json and allocates only the
// frame, its strings and its raw values. AppendFrame encodes without
// allocating; MarshalFrame and Encoder wrap it.
//
// # Connections
//
// Conn runs one connection: one reader goroutine, one writer goroutine
// writing frames in order (TCP_NODELAY set), heartbeats every 15 s both
// ways (swallowed on receipt), expiry after 45 s without a single incoming
// byte, requests matched to responses by id, and unsolicited frames handed
// to a handler in arrival order (queued until one is set). A bad record is
// answered with an error frame and the connection stays up, except for a
// frame of another protocol version, which is answered and then closes the
// connection. An error frame is never answered with another. The
// send queue is bounded; a peer that stops reading closes the connection
// as stalled instead of growing memory. Why a connection closed is kept:
// Err returns a *ClosedError whose Reason is one of the CloseReason values.
// Connections that share a Heartbeats (Options.Heartbeats; a fleet server
// shares one among all its agents) have their heartbeats sent by one
// goroutine per interval instead of each writer waking on its own timer.
// Between two pifleet ends that agreed CapabilityTCPLiveness in hello,
// the server stops its heartbeats (StopHeartbeats) and the agent lets TCP
// detect the loss of the connection (WatchTCP: a TCP user timeout and
// keepalive instead of its receive expiry); the agent's heartbeats and
// the server's expiry stay.
//
// Redialer keeps a connection to one peer up, walking ConnectionTable
// (connecting → authenticating → established, lost, rejected, closed) with
// reconnect delays of 1 s, 2 s, 4 s … 30 s. Server and Admit are the accept
// side: a Gate decides from the peer's address alone, before any byte is
// sent, whether it may talk at all.
//
// # Deliberate differences from the TypeScript implementation
//
//   - "toString", "__proto__" and "constructor" are not frame types (the
//     TS side accepts names of Object.prototype by accident).
//   - A v:2 frame closes the connection after the error frame (the TS side
//     keeps it open): a peer speaking another version cannot be understood.
//   - A number beyond ±1.8e308 (Infinity in JavaScript) is a schema
//     violation, since it could not be sent back out as JSON.
//   - When a frame has several problems, the first in field order is
//     reported (the TS validator names missing fields first); the code is
//     the same, only the message may differ.
//   - Sockets have TCP_NODELAY, which removes the ~40 ms delayed-ACK stall
//     of multi-frame answers.
package transport
