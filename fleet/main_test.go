package fleet_test

import (
	"crypto/ed25519"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"go.uber.org/goleak"

	"example.com/pifleet/examples/scriptedworker/scripted"
	"example.com/pifleet/fleet"
	"example.com/pifleet/internal/fsmkit/fsmtest"
	"example.com/pifleet/internal/shim"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/auth"
)

// TestMain fails the package's tests when any goroutine outlives them:
// every fleet and test peer is closed by its test, and Close must leave
// nothing running. The test binary also plays the agent's shim (as
// `pifleet-agent shim` does) for the end-to-end tests, and the scripted
// worker for Example.
//
// It also checks the fleet's state machine drivers (fsmtest.Trace): no
// event is dropped silently, and the whole suite fires every edge of the
// instance, task and connection tables (the fleet is the
// production driver of both: cmd/pifleet-server and the examples drive
// them too, through this package, and check only for dropped events).
func TestMain(m *testing.M) {
	if campaignApp != nil && os.Getenv(campaignAppEnv) == "1" {
		os.Exit(campaignApp(os.Args[1:]))
	}
	if spawnApp != nil && os.Getenv(spawnAppEnv) == "1" {
		os.Exit(spawnApp(os.Args[1:]))
	}
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "shim":
			os.Exit(shim.Main(os.Args[2:]))
		case "worker": // the scripted pi-compatible worker of Example
			os.Exit(scripted.Main(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
		}
	}
	dir, err := os.MkdirTemp("", "pfkey")
	if err != nil {
		panic(err)
	}
	testKeyFile = filepath.Join(dir, fleet.KeyFile)
	ring, err := auth.LoadOrCreate(testKeyFile)
	if err != nil {
		panic(err)
	}
	testServerKey = ring.Public()
	checks := fleetChecks
	if runtime.GOOS != "linux" {
		// The tests that kill or freeze workers find them through /proc:
		// elsewhere the instance and task tables are not driven whole.
		checks.Cover = checks.Cover[2:]
	}
	trace := fsmtest.StartTrace(checks)
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(trace.Check(code))
	}))
}

var fleetChecks = fsmtest.Checks{
	Cover: []fsmtest.Coverage{
		fsmtest.Cover(fleet.InstanceTable),
		fsmtest.Cover(fleet.TaskTable),
		fsmtest.Cover(transport.ConnectionTable),
	},
}

// campaignApp, when set (on Linux), is the kill campaigns' application:
// a program that embeds the fleet, as an application does, so that the
// server a campaign kills is the process the WithTaskDone callback runs
// in. The test binary runs it instead of the tests when campaignAppEnv
// is 1.
var campaignApp func(args []string) int

const campaignAppEnv = "PIFLEET_KILLCAMPAIGN_APP"

// spawnApp is an application that spawns one worker and holds when its
// spawned arrives, so that a test kills it there (spawnwindow_test.go).
// The test binary runs it when spawnAppEnv is 1.
var spawnApp func(args []string) int

const spawnAppEnv = "PIFLEET_SPAWN_APP"

// testKeyFile is the key file the tests' fleets use (fleet.WithKeyFile);
// the tests' agents trust testServerKey, its public key.
var (
	testKeyFile   string
	testServerKey ed25519.PublicKey
)
