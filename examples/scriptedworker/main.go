// Command scriptedworker is a pi-compatible worker with a scripted model:
// `pi --mode rpc` without pi, Node, keys or network, for loopback tests and
// demos. The worker itself is package scripted; see its documentation and
// README.md for the command line, the directive language and the
// differences from the real pi.
//
//	scriptedworker --mode rpc [--session <file|id> | --session-dir <dir> | --no-session] …
package main

import (
	"os"

	"example.com/pifleet/examples/scriptedworker/scripted"
)

func main() {
	os.Exit(scripted.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
