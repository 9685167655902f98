//go:build unix

package fleet_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"example.com/pifleet/internal/boltfile/boltfiletest"
)

// daemonUnderTest is one of the two binaries, set up on its own state
// directory.
type daemonUnderTest struct {
	name, file, ready string
	bin, stateDir     string
	args, env         []string
}

func corruptStateDaemons(t *testing.T) []daemonUnderTest {
	serverBin, _ := binaries(t)
	aw := newAgentWorld(t, "box", "srv", "127.0.0.1=srv")
	reg := t.TempDir()
	publish(t, reg, "default", `{}`)
	serverDir := shortDir(t, "pfs")
	copyKeyFile(t, serverDir)
	return []daemonUnderTest{
		{name: "pifleet-agent", file: "agent.db", ready: "listening", bin: aw.bin, stateDir: aw.stateDir, args: aw.args, env: aw.env},
		{name: "pifleet-server", file: "server.db", ready: "pifleet-server serving", bin: serverBin, stateDir: serverDir,
			args: []string{"serve", "--state-dir", serverDir, "--registry", reg, "--listen", "127.0.0.1:0", "--whois-static", "127.0.0.1=box"},
			env:  processEnv(os.Environ())},
	}
}

// Both daemons, started on a state directory whose database is empty or
// damaged, exit 1 with an error naming the file and the flag instead of
// starting empty (or crash-looping on a panic); with --reset-state (or
// its variable) they move the file aside and start afresh (#16 defect 7).
func TestDaemonsRefuseACorruptStateFile(t *testing.T) {
	for _, d := range corruptStateDaemons(t) {
		t.Run(d.name, func(t *testing.T) {
			path := filepath.Join(d.stateDir, d.file)
			// A real file first: the daemon makes it and stops cleanly.
			startProc(t, d.name, d.bin, d.env, d.ready, d.args...).terminate(t)
			if _, err := os.Stat(path); err != nil {
				t.Fatalf("the daemon made no %s: %v", d.file, err)
			}
			damages := map[string]func(t testing.TB, path string){}
			for _, c := range boltfiletest.Corruptions(nil, nil) {
				switch c.Name {
				case "empty file", "last page cut off", "random bytes over used page 0":
					damages[c.Name] = c.Damage
				}
			}
			good, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			for name, damage := range damages {
				t.Run(name, func(t *testing.T) {
					if err := os.WriteFile(path, good, 0o600); err != nil {
						t.Fatal(err)
					}
					damage(t, path)
					damaged, err := os.ReadFile(path)
					if err != nil {
						t.Fatal(err)
					}
					ctx, cancel := context.WithTimeout(t.Context(), procWait)
					defer cancel()
					cmd := exec.CommandContext(ctx, d.bin, d.args...)
					cmd.Env = d.env
					out, err := cmd.CombinedOutput()
					var exit *exec.ExitError
					if !errors.As(err, &exit) || exit.ExitCode() != 1 {
						t.Fatalf("%s on a damaged %s: %v, want exit status 1; output:\n%s", d.name, d.file, err, out)
					}
					for _, want := range []string{path, "is corrupt", "--reset-state"} {
						if !bytes.Contains(out, []byte(want)) {
							t.Errorf("the error does not say %q:\n%s", want, out)
						}
					}
					if bytes.Contains(out, []byte("panic")) {
						t.Errorf("%s panicked:\n%s", d.name, out)
					}
					if now, _ := os.ReadFile(path); !bytes.Equal(now, damaged) {
						t.Error("the refused start changed the damaged file")
					}
				})
			}

			// With the flag's variable it starts, says where the old file
			// went, and keeps it.
			env := append(append([]string(nil), d.env...),
				"PIFLEET_"+strings.ToUpper(strings.TrimPrefix(d.name, "pifleet-"))+"_RESET_STATE=1")
			p := startProc(t, d.name, d.bin, env, d.ready, d.args...)
			p.waitLog(t, "the file moved aside", func(l logLine) bool {
				return l.Message == "corrupt state file moved aside; starting with an empty state"
			})
			p.terminate(t)
			moved, _ := filepath.Glob(path + ".corrupt-*")
			if len(moved) != 1 {
				t.Fatalf("files moved aside: %v, want one", moved)
			}
			// And restarted without the flag, the new file is sound.
			startProc(t, d.name, d.bin, d.env, d.ready, d.args...).terminate(t)
		})
	}
}
