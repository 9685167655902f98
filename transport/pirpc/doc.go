// Package pirpc is the client side of pi's own RPC protocol: the JSONL
// stream a `pi --mode rpc` worker (@mariozechner/pi-coding-agent 0.73.1)
// reads on stdin and writes on stdout.
//
// # Framing
//
// One JSON object per line, LF only; one trailing CR is stripped; U+2028
// and U+2029 are data, never separators (LineReader). A record longer than
// Options.MaxLineBytes (16 MiB by default: agent_end and tool results can
// be large) is skipped while it is read, so memory stays bounded.
//
// # Commands and responses
//
// Every command of 0.73.1 has a type (Prompt, GetState, Clone, …); any other
// goes through RawCommand. Client.Call mints an id and waits for the
// response with that id: pi handles commands concurrently, so responses can
// come out of order. pi answers an unknown command without its id and with
// "Unknown command: X"; the Client gives that answer to the oldest pending
// call of type X, and its error matches ErrUnsupported, so a command of a
// newer pi (GetEntries, ClearQueue, …) can be probed as an optional
// capability.
//
// # Events, lines and the slow consumer
//
// One goroutine reads stdout all the time. Every record is delivered by
// Client.Lines in stdout order as a Line: the raw bytes (to forward
// verbatim) plus a typed view (Event or Response). A consumer that falls
// behind loses message_update and tool_execution_update lines first (each
// is superseded by a later line), never responses or ends; see Lines.
//
// # Settled
//
// pi 0.73.1 has no agent_settled: an agent_end may be followed by an
// auto-retry or a compaction that starts another run. SettleDetector
// derives the moment the worker is really idle, with a get_state barrier
// after each agent_end; the Client drives it and
// delivers a synthetic agent_settled Line (Line.Settled) exactly once per
// run. A newer pi's own agent_settled is used directly.
//
// Tally accumulates the last assistant text, turns, tool calls and cost of
// a task from the same events.
package pirpc
