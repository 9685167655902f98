package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"example.com/pifleet/fleet/controlapi"
)

// diff, cat, ls and grep reach the backend with every flag, print the
// worker's text without its terminal escape sequences, and print the
// answer as it is with --json.
func TestReviewCommands(t *testing.T) {
	text := "+\x1b]0;owned\x07added line\x1b[2J\n-removed"
	size := int64(42)
	b := &scriptedBackend{file: controlapi.FileResult{Text: &text}}
	api := apiServer(t, b)
	for _, tc := range []struct {
		args []string
		call string
	}{
		{[]string{"diff", "i-1", "--ref=main", "--staged", "--stat"}, "Diff i-1 ref=main staged=true stat=true"},
		{[]string{"diff", "i-1"}, "Diff i-1 ref= staged=false stat=false"},
		{[]string{"cat", "i-1", "src/main.go", "--offset=10", "--limit=5"}, "ReadFile i-1 src/main.go offset=10 limit=5"},
		{[]string{"grep", "i-1", "func [A-Z]", "--glob=*.go"}, `Grep i-1 "func [A-Z]" glob="*.go"`},
	} {
		status, out, errOut := runCLI(t, append(tc.args, api)...)
		if status != 0 {
			t.Fatalf("%v: status %d, %s", tc.args, status, errOut)
		}
		if got := b.lastCall(); got != tc.call {
			t.Errorf("%v: backend got %q, want %q", tc.args, got, tc.call)
		}
		if out != "+added line\n-removed\n" {
			t.Errorf("%v printed %q", tc.args, out)
		}
	}

	b.file = controlapi.FileResult{Entries: []controlapi.FileEntry{{Name: "main.go", Kind: "file", Bytes: &size}, {Name: "docs\x1b[31m", Kind: "dir"}}, Truncated: true}
	status, out, errOut := runCLI(t, "ls", "i-1", "src", api)
	if status != 0 || b.lastCall() != `ListDir i-1 "src"` {
		t.Fatalf("ls: status %d, call %q, %s", status, b.lastCall(), errOut)
	}
	if want := "        42  main.go\n            docs/\n"; out != want {
		t.Errorf("ls printed %q, want %q", out, want)
	}
	if !strings.Contains(errOut, "truncated") {
		t.Errorf("ls of a truncated answer does not say so: %q", errOut)
	}
	status, out, _ = runCLI(t, "ls", "i-1", api, "--json")
	var got controlapi.FileResult
	if err := json.Unmarshal([]byte(out), &got); status != 0 || err != nil || len(got.Entries) != 2 || !got.Truncated {
		t.Errorf("ls --json: status %d, %v: %s", status, err, out)
	}
	if b.lastCall() != `ListDir i-1 ""` {
		t.Errorf("ls without a path: %q", b.lastCall())
	}

	b.err = &controlapi.Error{Code: controlapi.CodeFileError, Detail: "not_found", Message: "no such file: nope.go"}
	status, _, errOut = runCLI(t, "cat", "i-1", "nope.go", api)
	if status != 1 || !strings.Contains(errOut, "no such file: nope.go") {
		t.Errorf("cat of a missing file: status %d, %q", status, errOut)
	}
}

// The client commands find the server of PIFLEET_STATE_DIR: its socket,
// as serve with that state directory makes it.
func TestClientCommandsFollowPifleetStateDir(t *testing.T) {
	dir := socketDir(t)
	b := &scriptedBackend{status: sampleStatus()}
	addr := controlapi.DefaultAddr(dir)
	l, err := controlapi.Listen(addr, controlapi.ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- controlapi.Serve(ctx, l, controlapi.NewServer(b), time.Second) }()
	defer func() { cancel(); <-done }()
	t.Setenv("PIFLEET_STATE_DIR", dir)
	if v, ok := os.LookupEnv("PIFLEET_API"); ok {
		os.Unsetenv("PIFLEET_API")
		t.Cleanup(func() { os.Setenv("PIFLEET_API", v) })
	}
	if status, _, errOut := runCLI(t, "status"); status != 0 || b.lastCall() != "Status" {
		t.Errorf("status with PIFLEET_STATE_DIR=%s: %d %s", dir, status, errOut)
	}
}

// --timeout bounds a wait, and says it gave up rather than failing
// obscurely; a command line that cannot work exits 2.
func TestTimeoutAndUsageErrors(t *testing.T) {
	api := apiServer(t, &scriptedBackend{})
	status, _, errOut := runCLI(t, "prompt", "--wait", "--timeout=50ms", "i-1", "never settles", api)
	if status != 1 || !strings.Contains(errOut, "gave up waiting for the worker after 50ms") {
		t.Errorf("prompt --wait --timeout: %d %q", status, errOut)
	}
	for _, args := range [][]string{
		{"spawn", "--agent=a"},
		{"spawn", "--attach", "--agent=a", "--cwd=/", "--bundle=b"},
		{"prompt", "i-1"},
		{"prompt", "--timeout=-1s", "--wait", "i-1", "x"},
		{"teleport"},
	} {
		status, out, errOut := runCLI(t, append(args, api)...)
		if status != 2 || out != "" || strings.Count(errOut, "\n") != 2 || !strings.Contains(errOut, "--help' for usage.") {
			t.Errorf("%v: status %d, stdout %q, stderr %q", args, status, out, errOut)
		}
	}
}

// install writes a user service that runs serve with the flags given
// after --, once serve accepts them.
func TestInstall(t *testing.T) {
	home := t.TempDir()
	status, out, errOut := runCLI(t, "install", "--systemd", "--home", home, "--binary", "/usr/local/bin/pifleet-server",
		"--", "--agent", "buildbox=100.64.0.7:9788", "--trust", "buildbox=steer")
	if status != 0 {
		t.Fatalf("install: %d %s", status, errOut)
	}
	for _, want := range []string{"systemctl --user enable --now pifleet-server", "loginctl enable-linger", "--trust NAME=POLICY"} {
		if !strings.Contains(out, want) {
			t.Errorf("install says nothing of %q:\n%s", want, out)
		}
	}
	unit, err := os.ReadFile(filepath.Join(home, ".config/systemd/user/pifleet-server.service"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "ExecStart=/usr/local/bin/pifleet-server serve --agent buildbox=100.64.0.7:9788 --trust buildbox=steer\n"; !strings.Contains(string(unit), want) ||
		strings.Contains(string(unit), "KillMode") {
		t.Errorf("unit:\n%s\nwant %q and no KillMode", unit, want)
	}
	status, out, _ = runCLI(t, "install", "--launchd", "--print", "--home", home, "--binary", "/b/pifleet-server")
	if status != 0 || !strings.Contains(out, "dev.pifleet.server.plist") || !strings.Contains(out, "<string>serve</string>") {
		t.Errorf("launchd: %d\n%s", status, out)
	}
	if status, _, errOut := runCLI(t, "install", "--systemd", "--print", "--home", home, "--", "--no-such-flag"); status == 0 || !strings.Contains(errOut, "would not start") {
		t.Errorf("install of a serve that would not parse: %d %s", status, errOut)
	}
}
