// Package scripted is a pi-compatible worker: it speaks the subset of
// `pi --mode rpc` (@mariozechner/pi-coding-agent 0.73.1) that pifleet uses,
// with a scripted model instead of an LLM. It needs no pi, no Node, no keys
// and no network, so loopback tests, demos and the quickstart can run
// anywhere. Main is the whole process; examples/scriptedworker is a thin
// command around it, and a program that must not build anything at run
// time (examples/quickstart) re-executes itself into Main.
//
//	scriptedworker --mode rpc [--session <file|id> | --session-dir <dir> | --no-session]
//	               [--provider faux] [--model faux-1] [--thinking <level>]
//	               [-e <extension>]… [--skill <path>]… [--prompt-template <path>]… [--tools a,b]
//
// The model answers each prompt from directive lines exactly like the faux
// provider pifleet's tests load into the real pi (testdata/pi/README.md):
// "say: hi", "bash: ls", "write: f.txt text", "read: f.txt", "think: …",
// "delay: 200", "error: 503 overloaded", "fail: 1 503 overloaded"; without
// a directive it answers "faux: <prompt>". Commands, responses, events and
// their order follow pi 0.73.1 (no agent_settled, as in 0.73.1), and session
// files are real pi v3 JSONL files. Differences from the real pi are listed
// in examples/scriptedworker/README.md.
//
// Environment: PI_CODING_AGENT_DIR (settings.json retry settings, default
// session directory), PI_CODING_AGENT_SESSION_DIR, PIFLEET_FAUX_COST,
// PIFLEET_FAUX_CHUNK, PIFLEET_FAUX_DELAY_MS, PIFLEET_FAUX_CONTEXT_WINDOW.
//
// stdin EOF exits 0 at once (like pi, even mid-run); SIGTERM kills running
// tools and exits 143, SIGHUP 129.
package scripted
