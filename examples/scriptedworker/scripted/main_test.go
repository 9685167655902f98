package scripted

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"example.com/pifleet/internal/pitest"
	"example.com/pifleet/transport/pirpc"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

func TestParseFlags(t *testing.T) {
	var stderr bytes.Buffer
	cfg, err := parseFlags([]string{"--mode", "rpc", "--offline", "--model=acme/big:high", "-e", "a.ts", "--extension", "b.ts",
		"--skill", "sk", "--prompt-template=t.md", "--tools", "read,bash", "--future-flag", "value", "--no-session", "-ne"}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	want := config{mode: "rpc", provider: "acme", model: "big", thinking: "high", extensions: []string{"a.ts", "b.ts"},
		skills: []string{"sk"}, promptTemplates: []string{"t.md"}, tools: []string{"read", "bash"}, noSession: true}
	if diff := cmp.Diff(want, cfg, cmp.AllowUnexported(config{})); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	if got := stderr.String(); got != "scriptedworker: ignoring flag --future-flag\n" {
		t.Errorf("stderr %q", got)
	}
	for _, bad := range [][]string{{"--session"}, {"--thinking", "extreme"}, {"hello"}} {
		if _, err := parseFlags(bad, &stderr); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestStartupFailures(t *testing.T) {
	var stderr bytes.Buffer
	if code := Main([]string{"--mode", "text"}, strings.NewReader(""), &bytes.Buffer{}, &stderr); code != 1 {
		t.Errorf("--mode text: exit %d", code)
	}
	stderr.Reset()
	var stdout bytes.Buffer
	code := Main([]string{"--mode", "rpc", "-e", filepath.Join(t.TempDir(), "missing.ts")}, strings.NewReader(""), &stdout, &stderr)
	if code != 1 || !strings.HasPrefix(stderr.String(), "Error: Failed to load extension") || stdout.Len() != 0 {
		t.Errorf("missing extension: exit %d, stderr %q, stdout %q", code, stderr.String(), stdout.String())
	}
}

func user(text string) *message { return userMessage(text) }

func TestFauxReplies(t *testing.T) {
	f := &fauxModel{failures: map[string]int{}}
	tests := []struct {
		name    string
		context []*message
		blocks  []block
		err     string
		delay   int
	}{
		{"no directive", []*message{user("hello there")}, []block{{kind: blockText, text: "faux: hello there"}}, "", 0},
		{"directives in order", []*message{user("think: hm\n  say: one\nbash: ls -l\nwrite: a/b.txt x\\ny\nread: f \ntool: grep {\"pattern\":\"x\"}")}, []block{
			{kind: blockThinking, text: "hm"}, {kind: blockText, text: "one"},
			{kind: blockTool, tool: "bash", args: json.RawMessage(`{"command":"ls -l"}`)},
			{kind: blockTool, tool: "write", args: json.RawMessage(`{"path":"a/b.txt","content":"x\ny"}`)},
			{kind: blockTool, tool: "read", args: json.RawMessage(`{"path":"f"}`)},
			{kind: blockTool, tool: "grep", args: json.RawMessage(`{"pattern":"x"}`)}}, "", 0},
		{"delay and plain text", []*message{user("delay: 250\nslowly")}, []block{{kind: blockText, text: "faux: slowly"}}, "", 250},
		{"error only", []*message{user("error: 503 overloaded")}, nil, "503 overloaded", 0},
		{"tool results", []*message{user("x"), {Role: "assistant"},
			toolResultMessage("1", "bash", "hi\nthere", nil, false), toolResultMessage("2", "read", "ENOENT", obj{}, true)},
			[]block{{kind: blockText, text: "faux: tool results: bash=hi; read=ERROR: ENOENT"}}, "", 0},
	}
	for _, tc := range tests {
		p := f.reply(tc.context)
		if diff := cmp.Diff(tc.blocks, p.blocks, cmp.AllowUnexported(block{})); diff != "" {
			t.Errorf("%s: blocks (-want +got):\n%s", tc.name, diff)
		}
		if p.errMsg != tc.err || p.delayMs != tc.delay {
			t.Errorf("%s: error %q delay %d", tc.name, p.errMsg, p.delayMs)
		}
	}

	// fail: n counts attempts at the same message.
	m := user("fail: 2 503 overloaded\nsay: finally")
	for attempt, want := range []string{"503 overloaded", "503 overloaded", ""} {
		if p := f.reply([]*message{m}); p.errMsg != want {
			t.Errorf("attempt %d: error %q, want %q", attempt+1, p.errMsg, want)
		}
	}
}

func TestChunks(t *testing.T) {
	if got := chunks("", 4); !slices.Equal(got, []string{""}) {
		t.Errorf("empty: %q", got)
	}
	if got := chunks("héllo wörld", 4); !slices.Equal(got, []string{"héll", "o wö", "rld"}) {
		t.Errorf("runes: %q", got)
	}
}

// TestReadsRealPiSession opens a session file the real pi 0.73.1 wrote
// (tools, a retried error, a custom entry, a name, a bash command and a
// compaction) and rebuilds the context the way pi does.
func TestReadsRealPiSession(t *testing.T) {
	s, err := openSession("testdata/pi-0.73.1-session.jsonl", "/tmp")
	if err != nil {
		t.Fatal(err)
	}
	if s.header.Version != 3 || s.name() != "fixture" || len(s.entries) != 16 {
		t.Fatalf("header %+v, name %q, %d entries", s.header, s.name(), len(s.entries))
	}
	var roles []string
	for _, m := range s.context() {
		roles = append(roles, m.Role)
	}
	want := []string{"compactionSummary", "user", "assistant", "toolResult", "toolResult", "assistant", "user",
		"assistant", "assistant", "bashExecution", "user", "assistant"}
	if diff := cmp.Diff(want, roles); diff != "" {
		t.Errorf("context roles (-want +got):\n%s", diff)
	}
	// Entries survive a round trip byte for byte (as JSON values).
	raw, _ := os.ReadFile("testdata/pi-0.73.1-session.jsonl")
	lines := bytes.Split(bytes.TrimSpace(raw), []byte("\n"))
	for i, e := range s.entries {
		out, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		var a, b any
		_ = json.Unmarshal(lines[i+1], &a)
		_ = json.Unmarshal(out, &b)
		if diff := cmp.Diff(a, b); diff != "" {
			t.Errorf("entry %d (%s) changed (-pi +ours):\n%s", i, e.Type, diff)
		}
	}
}

func TestNewSessionFiles(t *testing.T) {
	dir := t.TempDir()
	s := newSession(dir, "/work", "")
	if !strings.HasPrefix(filepath.Base(s.path), strings.NewReplacer(":", "-", ".", "-").Replace(s.header.Timestamp)+"_") ||
		len(s.header.ID) != 36 || s.header.ID[14] != '7' {
		t.Fatalf("file %s id %s", s.path, s.header.ID)
	}
	if _, err := s.append(&entry{Type: "model_change", Provider: "faux", ModelID: "faux-1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.append(&entry{Type: "message", Message: user("hi")}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("file written before the first assistant message: %v", err)
	}
	if _, err := s.append(&entry{Type: "message", Message: &message{Role: "assistant", StopReason: "stop", Usage: &usage{}}}); err != nil {
		t.Fatal(err)
	}
	header, entries := pitest.SessionEntries(t, s.path)
	if header["id"] != s.header.ID || len(entries) != 3 || entries[0]["parentId"] != nil || entries[2]["parentId"] != entries[1]["id"] {
		t.Fatalf("header %v entries %v", header, entries)
	}
	if got := defaultSessionDir("/home/u/proj"); !strings.HasSuffix(got, filepath.Join("sessions", "--home-u-proj--")) {
		t.Errorf("default session dir %s", got)
	}
}

// The process-level behaviours: stdin EOF, signals, --no-session and the
// default session directory.

func TestStdinEOFExitsAtOnceMidRun(t *testing.T) {
	w := pitest.Start(t, pitest.Scripted, pitest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), pitest.DefaultWait)
	defer cancel()
	if err := w.Client.Prompt(ctx, "bash: sleep 30"); err != nil {
		t.Fatal(err)
	}
	w.Until(t, func(l pirpc.Line) bool { return l.Event != nil && l.Event.Type == pirpc.EventToolExecutionStart })
	w.Client.CloseInput()
	if err := w.ExitErr(); err != nil {
		t.Fatalf("exit: %v", err)
	}
}

func TestSIGTERMKillsToolsAndExits143(t *testing.T) {
	w := pitest.Start(t, pitest.Scripted, pitest.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), pitest.DefaultWait)
	defer cancel()
	if err := w.Client.Prompt(ctx, "bash: echo $$; exec sleep 30"); err != nil {
		t.Fatal(err)
	}
	lines := w.Until(t, func(l pirpc.Line) bool {
		return l.Event != nil && l.Event.Type == pirpc.EventToolExecutionUpdate && strings.Contains(string(l.Raw), `"text"`)
	})
	var upd struct {
		PartialResult struct {
			Content []struct{ Text string } `json:"content"`
		} `json:"partialResult"`
	}
	if err := json.Unmarshal(lines[len(lines)-1].Raw, &upd); err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(upd.PartialResult.Content[0].Text))
	if err != nil {
		t.Fatalf("shell pid: %v", err)
	}
	if err := w.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var exitErr *exec.ExitError
	if err := w.ExitErr(); !errors.As(err, &exitErr) || exitErr.ExitCode() != 143 {
		t.Fatalf("exit: %v, want code 143", err)
	}
	if !exitsWithin(t, pid, 10*time.Second) {
		t.Errorf("the tool's shell %d survived SIGTERM", pid)
	}
}

// exitsWithin waits until the process pid (not a child of the test) has
// terminated, using a pidfd, which becomes readable at termination.
func exitsWithin(t *testing.T, pid int, d time.Duration) bool {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return true // gone already
	}
	if err != nil {
		t.Skipf("pidfd_open: %v", err)
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, int(d.Milliseconds()))
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return err == nil && n == 1
	}
}

func TestNoSessionWritesNothing(t *testing.T) {
	w := pitest.Start(t, pitest.Scripted, pitest.Options{NoSession: true})
	ctx, cancel := context.WithTimeout(context.Background(), pitest.DefaultWait)
	defer cancel()
	if err := w.Client.Prompt(ctx, "say: hi"); err != nil {
		t.Fatal(err)
	}
	w.UntilSettled(t)
	st, err := w.Client.GetState(ctx)
	if err != nil || st.SessionFile != "" || st.SessionID == "" || st.MessageCount != 2 {
		t.Fatalf("state %+v %v", st, err)
	}
	w.Stop(t)
	var files []string
	filepath.WalkDir(w.Spec.AgentDir, func(path string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(path, ".jsonl") {
			files = append(files, path)
		}
		return nil
	})
	if len(files) != 0 {
		t.Fatalf("session files written: %v", files)
	}
}

func TestDefaultSessionDirectory(t *testing.T) {
	spec := pitest.Command(t, pitest.Scripted, pitest.Options{})
	// Without --session-dir the file goes to $PI_CODING_AGENT_DIR/sessions/--<cwd>--/.
	args := slices.DeleteFunc(slices.Clone(spec.Args), func(s string) bool { return s == "--session-dir" || s == spec.SessionDir })
	cmd := exec.Command(spec.Path, args...)
	cmd.Dir, cmd.Env = spec.Dir, spec.Env
	cmd.Stdin = strings.NewReader(`{"id":"1","type":"get_state"}` + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	var resp struct {
		Data pirpc.State `json:"data"`
	}
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	want := filepath.Join(spec.AgentDir, "sessions", "--"+strings.ReplaceAll(strings.TrimPrefix(spec.Dir, "/"), "/", "-")+"--")
	if filepath.Dir(resp.Data.SessionFile) != want {
		t.Fatalf("session file %s, want it in %s", resp.Data.SessionFile, want)
	}
}
