package main

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"example.com/pifleet/internal/cli"
	"example.com/pifleet/internal/shim"

	"example.com/pifleet/internal/fsmkit/fsmtest"
)

// TestMain lets the test binary play the worker shim, as `pifleet-agent
// shim` does, or pifleet-server itself for a real agent (the end-to-end test runs one in-process),
// and fails the package when a test leaves a goroutine behind. The signal
// package's own loop, started by the first signal.Notify, lives as long
// as the process.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "shim" {
		os.Exit(shim.Main(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == "pifleet-server" {
		// The binary itself, for tests that need it as a subprocess
		// (`pifleet-server mcp` under an MCP client).
		os.Exit(run(os.Args[2:], cli.Std()))
	}
	if os.Getenv("GORACE") == "" {
		// Shims are this binary under -race: let them exit at once.
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	// The fleet package checks the coverage of the tables this server
	// drives; here, only that no event is dropped silently.
	trace := fsmtest.StartTrace(fsmtest.Checks{})
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("os/signal.signal_recv"), goleak.IgnoreAnyFunction("os/signal.loop"),
		goleak.Cleanup(func(code int) { os.Exit(trace.Check(code)) }))
}
