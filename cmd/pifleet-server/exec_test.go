//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"example.com/pifleet/fleet/agent"
	"example.com/pifleet/transport/identity"
	"example.com/pifleet/transport/trust"
)

// `exec` through a real server and agent: output streamed to stdout and
// stderr (control characters made visible), the command's exit status
// as the CLI's, --json for scripts. (The steer policy it needs is tested
// with the SDK: TestExecRefusals.)
func TestExecCommand(t *testing.T) {
	dir := socketDir(t)
	whois, err := identity.ParseStatic("127.0.0.1=box")
	if err != nil {
		t.Fatal(err)
	}
	addr := runAgent(t, agent.Config{Machine: "box", Listen: "127.0.0.1:0", Pin: trust.Pin{Machine: "box"},
		Whois: whois, StateDir: filepath.Join(dir, "agent"), SessionsPoll: -1,
		ExecPolicy: agent.ExecFull, ExecShell: []string{"/bin/bash", "-c"}})
	cmd := &ServeCmd{StateDir: filepath.Join(dir, "state"), Registry: filepath.Join(dir, "registry"), Listen: "127.0.0.1:0",
		Agent: []string{"box=" + addr}, WhoisStatic: []string{"127.0.0.1=box"}}
	s, c := startServe(t, cmd)
	api := "--api=" + s.API.String()
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "f.txt"), []byte("content\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	if status, _, errOut := runCLI(t, "trust", "set", "box", "steer", api); status != 0 {
		t.Fatal(errOut)
	}
	awaitAgentState(t, c, "box", "established")

	status, out, errOut := runCLI(t, "exec", api, "--machine=box", "--cwd="+work, "--", "cat", "f.txt")
	if status != 0 || out != "content\n" {
		t.Errorf("cat: %d %q %q", status, out, errOut)
	}
	status, out, errOut = runCLI(t, "exec", api, "--machine=box", "--cwd="+work, "--shell", `printf 'a\033]0;title\007b\n'; echo oops >&2; exit 3`)
	if status != 3 || out != `a\x1b]0;title\x07b`+"\n" || errOut != "oops\n" {
		t.Errorf("shell: %d %q %q", status, out, errOut)
	}
	status, out, _ = runCLI(t, "exec", api, "--machine=box", "--cwd="+work, "--json", "--", "sh", "-c", "echo hi; exit 2")
	if status != 2 || !strings.Contains(out, `"stdout": "hi\n"`) || !strings.Contains(out, `"exitCode": 2`) {
		t.Errorf("json: %d %s", status, out)
	}
	status, _, errOut = runCLI(t, "exec", api, "--machine=box", "--cwd="+work, "--timeout=100ms", "--", "sleep", "300")
	if status != 124 || !strings.Contains(errOut, "timed out") {
		t.Errorf("timeout: %d %s", status, errOut)
	}
	status, _, errOut = runCLI(t, "exec", api, "--machine=box", "--cwd=/no/such", "--", "true")
	if status != 1 || !strings.Contains(errOut, "exec_refused") {
		t.Errorf("bad cwd: %d %s", status, errOut)
	}
	if status, _, errOut := runCLI(t, "exec", api, "--cwd="+work, "--", "true"); status == 0 {
		t.Errorf("no machine nor instance accepted: %s", errOut)
	}
	l, err := c.Executions(t.Context(), "box")
	if err != nil || len(l) != 4 || l[0].State != "exited" || !l[0].TimedOut {
		t.Errorf("executions %+v %v", l, err)
	}
}

func TestTerminalSafe(t *testing.T) {
	for in, want := range map[string]string{
		"plain\ttext\n":    "plain\ttext\n",
		"\x1b[2J":          `\x1b[2J`,
		"caf\xc3\xa9":      "café",
		"bad\xffutf8":      `bad\xffutf8`,
		"cr\roverwrite":    `cr\x0doverwrite`,
		"c1\u009b31m":      `c1\x9b31m`,
		"\x00nul and \x7f": `\x00nul and \x7f`,
	} {
		if got := terminalSafe([]byte(in)); got != want {
			t.Errorf("terminalSafe(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzTerminalSafe(f *testing.F) {
	for _, s := range []string{"a\x1b[31mb", "\xff\xfe", "ok\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		out := terminalSafe(b)
		for _, r := range out {
			if (r < 0x20 && r != '\n' && r != '\t') || r == 0x7f || (r >= 0x80 && r < 0xa0) {
				t.Fatalf("control character %U left in %q", r, out)
			}
		}
	})
}
