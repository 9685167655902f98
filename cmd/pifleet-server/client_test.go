package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alecthomas/kong"
	"github.com/google/go-cmp/cmp"

	"example.com/pifleet/fleet/controlapi"
)

// scriptedBackend is the test double of controlapi.Backend behind the
// client commands: it records each call and answers from its fields.
type scriptedBackend struct {
	controlapi.Backend // methods a test does not script panic

	mu    sync.Mutex
	calls []string

	status   controlapi.Status
	progress []controlapi.SpawnProgress
	err      error
	doctor   controlapi.DoctorReport
	changes  []controlapi.Change
	sessions []controlapi.Session
	search   controlapi.SearchResult
	resumed  controlapi.SpawnResult
	file     controlapi.FileResult
}

func (b *scriptedBackend) record(format string, args ...any) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, fmt.Sprintf(format, args...))
	return b.err
}

func (b *scriptedBackend) lastCall() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.calls) == 0 {
		return ""
	}
	return b.calls[len(b.calls)-1]
}

func (b *scriptedBackend) Status(context.Context) (controlapi.Status, error) {
	return b.status, b.record("Status")
}

func (b *scriptedBackend) Spawn(_ context.Context, req controlapi.SpawnRequest, progress func(controlapi.SpawnProgress)) (controlapi.SpawnResult, error) {
	raw, _ := json.Marshal(req)
	if err := b.record("Spawn %s", raw); err != nil {
		return controlapi.SpawnResult{}, err
	}
	for _, p := range b.progress {
		progress(p)
	}
	return controlapi.SpawnResult{InstanceID: "i-7", TraceID: "tr-7"}, nil
}

func (b *scriptedBackend) Prompt(ctx context.Context, id string, req controlapi.PromptRequest) (controlapi.PromptResult, error) {
	if req.Text == "never settles" {
		<-ctx.Done() // the client gave up
		return controlapi.PromptResult{}, ctx.Err()
	}
	res := controlapi.PromptResult{}
	if req.Task {
		res.TaskID = "t-3"
	}
	if req.Wait {
		res.Reply, res.Settled = "all done", true
	}
	return res, b.record("Prompt %s %q wait=%v task=%v", id, req.Text, req.Wait, req.Task)
}

func (b *scriptedBackend) Steer(_ context.Context, id, text string) error {
	return b.record("Steer %s %q", id, text)
}
func (b *scriptedBackend) Abort(_ context.Context, id string) error { return b.record("Abort %s", id) }
func (b *scriptedBackend) Stop(_ context.Context, id string) error  { return b.record("Stop %s", id) }

func (b *scriptedBackend) Output(_ context.Context, id string) (controlapi.Output, error) {
	return controlapi.Output{Tail: []json.RawMessage{
		json.RawMessage(`{"type":"tool_execution_start","toolName":"bash"}`),
		json.RawMessage(`{"type":"agent_end"}`),
	}, LastAssistant: "the answer"}, b.record("Output %s", id)
}

func (b *scriptedBackend) Tasks(context.Context) ([]controlapi.Task, error) {
	return b.status.Tasks, b.record("Tasks")
}

func (b *scriptedBackend) Accept(_ context.Context, id string, d controlapi.Disposition) error {
	return b.record("Accept %s %s", id, d)
}

func (b *scriptedBackend) Reject(_ context.Context, id, feedback string) (controlapi.RejectResult, error) {
	return controlapi.RejectResult{Escalated: feedback == "third strike"}, b.record("Reject %s %q", id, feedback)
}

func (b *scriptedBackend) TrustList(context.Context) ([]controlapi.TrustDecision, error) {
	return []controlapi.TrustDecision{{Machine: "gpu-1", Policy: controlapi.PolicySteer, DecidedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}}, b.record("TrustList")
}

func (b *scriptedBackend) TrustSet(_ context.Context, m string, p controlapi.Policy) (controlapi.TrustDecision, error) {
	return controlapi.TrustDecision{Machine: m, Policy: p}, b.record("TrustSet %s %s", m, p)
}

func (b *scriptedBackend) Watch(ctx context.Context) (<-chan controlapi.Change, error) {
	if err := b.record("Watch"); err != nil {
		return nil, err
	}
	out := make(chan controlapi.Change)
	go func() {
		defer close(out) // the server ends the stream after the script
		for _, c := range b.changes {
			select {
			case out <- c:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

func (b *scriptedBackend) Rebundle(_ context.Context, id, name string) (controlapi.RebundleResult, error) {
	return controlapi.RebundleResult{Bundle: name, BundleHash: "h2"}, b.record("Rebundle %s %s", id, name)
}

func (b *scriptedBackend) SetTools(_ context.Context, id string, tools []string) ([]string, error) {
	return tools, b.record("SetTools %s %s", id, strings.Join(tools, "|"))
}

func (b *scriptedBackend) SetModel(_ context.Context, id string, m controlapi.ModelRef) error {
	return b.record("SetModel %s %s %s", id, m.Provider, m.ID)
}

func (b *scriptedBackend) PinModel(_ context.Context, id string, pin bool) (controlapi.ModelPin, error) {
	return controlapi.ModelPin{InstanceID: id, Pinned: pin, Model: &controlapi.ModelRef{Provider: "faux", ID: "faux-1"}},
		b.record("PinModel %s %v", id, pin)
}

func (b *scriptedBackend) UIAnswer(_ context.Context, id string, v json.RawMessage) error {
	return b.record("UIAnswer %s %s", id, v)
}

func (b *scriptedBackend) Doctor(context.Context) (controlapi.DoctorReport, error) {
	return b.doctor, b.record("Doctor")
}

func (b *scriptedBackend) Sessions(_ context.Context, f controlapi.SessionFilter) ([]controlapi.Session, error) {
	return b.sessions, b.record("Sessions machine=%s kind=%s", f.Machine, f.Kind)
}

func (b *scriptedBackend) SearchSessions(_ context.Context, q controlapi.SessionSearch) (controlapi.SearchResult, error) {
	return b.search, b.record("SearchSessions %q machine=%s cwd=%s", q.Query, q.Machine, q.Cwd)
}

func (b *scriptedBackend) CreateBaseline(_ context.Context, req controlapi.BaselineRequest) (controlapi.Baseline, error) {
	raw, _ := json.Marshal(req)
	return controlapi.Baseline{Machine: req.Agent, Cwd: req.Cwd, Name: "baseline:api", Path: "/s/base.jsonl", GitHead: "0123456789abcdef",
		Bundle: req.Bundle, Compacted: true, Summary: "primed"}, b.record("CreateBaseline %s", raw)
}

func (b *scriptedBackend) Resume(_ context.Context, req controlapi.ResumeRequest, _ func(controlapi.SpawnProgress)) (controlapi.SpawnResult, error) {
	raw, _ := json.Marshal(req)
	return b.resumed, b.record("Resume %s", raw)
}

// socketDir is a temporary directory short enough for a unix socket.
func socketDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "pfs")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// apiServer serves b on a unix socket until the test ends and returns the
// --api flag that reaches it.
func apiServer(t *testing.T, b controlapi.Backend) string {
	t.Helper()
	addr := controlapi.DefaultAddr(socketDir(t))
	l, err := controlapi.Listen(addr, controlapi.ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- controlapi.Serve(ctx, l, controlapi.NewServer(b), time.Second) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return "--api=" + addr.String()
}

func sampleStatus() controlapi.Status {
	at := time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)
	base := controlapi.Session{Machine: "gpu-1", SessionID: "s-1", Path: "/s/base.jsonl", Name: "baseline:api", Cwd: "/src/app",
		Kind: controlapi.KindBaseline, Pinned: true, GitHead: "0123456789abcdef0123", StaleBaseline: true, UpdatedAt: at}
	return controlapi.Status{
		Baselines: []controlapi.Session{base},
		Agents: []controlapi.Agent{
			{Name: "gpu-1", State: "established", Machine: "gpu-1", Policy: "steer", Platform: "linux-x64", Version: "0.1.0", Addr: "100.64.0.2:9788", ConnectedAt: &at},
			{Name: "mac", State: "lost", LastError: "dial tcp: connection refused"},
		},
		Instances: []controlapi.Instance{{ID: "i-1", Agent: "gpu-1", Cwd: "/src/app", State: "awaiting_review", Bundle: "default",
			Model: &controlapi.ModelRef{Provider: "anthropic", ID: "claude"}, OpenTask: "t-1", Activity: "bash",
			PendingUI:   []controlapi.UIRequest{{ID: "ui-1", InstanceID: "i-1", Kind: "confirm", Title: "Delete?"}},
			FromSession: "/s/base.jsonl", SessionMode: controlapi.SessionClone, StaleBaseline: true}},
		Tasks: []controlapi.Task{{ID: "t-1", InstanceID: "i-1", State: "awaiting_review", Rejects: 1, MaxRejects: 3,
			Prompt: "fix the\nbug", LastDone: &controlapi.TaskDone{Status: "settled"}}},
	}
}

func sampleSessions() []controlapi.Session {
	at := time.Date(2026, 11, 29, 20, 0, 0, 0, time.UTC)
	return []controlapi.Session{
		{Machine: "gpu-1", SessionID: "s-2", Path: "/s/clone.jsonl", Name: "task:t-1:fix", Cwd: "/src/app", Kind: controlapi.KindTask,
			AttachedInstanceID: "i-1", UpdatedAt: at, Registry: "synced"},
		{Machine: "gpu-1", SessionID: "s-1", Path: "/s/base.jsonl", Name: "baseline:api", Cwd: "/src/app", Kind: controlapi.KindBaseline,
			Pinned: true, StaleBaseline: true, UpdatedAt: at, Registry: "synced"},
		{Machine: "mac", SessionID: "s-3", Path: "/m/scratch.jsonl", Cwd: "/w", Kind: controlapi.KindScratch, UpdatedAt: at, Registry: "stale"},
	}
}

func TestClientCommands(t *testing.T) {
	b := &scriptedBackend{status: sampleStatus(), sessions: sampleSessions(),
		search:  controlapi.SearchResult{Hits: []controlapi.SessionHit{{Machine: "gpu-1", SessionID: "s-1", Path: "/s/base.jsonl", Snippet: "the zanzibar\nmodule"}}},
		resumed: controlapi.SpawnResult{InstanceID: "i-9", FromSession: "/s/clone.jsonl", SessionMode: controlapi.SessionAttach}}
	api := apiServer(t, b)
	for _, tc := range []struct {
		args     []string
		call     string
		stdout   []string // substrings of the readable output
		jsonPath string   // a key of the --json output ("" = no --json variant)
	}{
		{[]string{"status"}, "Status", []string{
			"gpu-1  established  gpu-1", "mac    lost", "dial tcp: connection refused",
			"i-1       gpu-1  awaiting_review (1 dialog(s))  default  anthropic/claude  t-1",
			"baseline:api (clone) STALE  /src/app",
			"t-1   i-1       awaiting_review  1/3      settled  fix the bug",
			"baseline:api  gpu-1    0123456789ab  STALE  "}, "baselines"},
		{[]string{"spawn", "--agent=gpu-1", "--cwd=/src", "--bundle=default", "--model=p/m", "--env=A=1;B=2", "--progress=never"},
			`Spawn {"agent":"gpu-1","cwd":"/src","bundle":"default","model":{"provider":"p","id":"m"},"env":{"A":"1","B":"2"}}`,
			[]string{"i-7\n"}, "instanceId"},
		{[]string{"prompt", "i-1", "hello"}, `Prompt i-1 "hello" wait=false task=false`, nil, ""},
		{[]string{"prompt", "--wait", "i-1", "hello"}, `Prompt i-1 "hello" wait=true task=false`, []string{"all done"}, "reply"},
		{[]string{"prompt", "--task", "i-1", "hello"}, `Prompt i-1 "hello" wait=false task=true`, []string{"task t-3"}, "taskId"},
		{[]string{"steer", "i-1", "also tests"}, `Steer i-1 "also tests"`, []string{"steered i-1"}, ""},
		{[]string{"abort", "i-1"}, "Abort i-1", []string{"aborted i-1"}, "aborted"},
		{[]string{"retry", "gpu-1"}, "Retry gpu-1", []string{"dialling gpu-1 now"}, "retrying"},
		{[]string{"steer", "i-1", "more"}, `Steer i-1 "more"`, nil, "steered"},
		{[]string{"stop", "i-1"}, "Stop i-1", nil, "state"},
		{[]string{"accept", "t-2"}, "Accept t-2 keep_idle", nil, "disposition"},
		{[]string{"trust", "set", "gpu-3", "steer"}, "TrustSet gpu-3 steer", nil, "policy"},
		{[]string{"model", "i-1", "p/m"}, "SetModel i-1 p m", nil, "model"},
		{[]string{"ui", "answer", "ui-1", "yes"}, `UIAnswer ui-1 "yes"`, nil, "requestId"},
		{[]string{"stop", "i-1"}, "Stop i-1", []string{"stopped i-1"}, ""},
		{[]string{"output", "i-1"}, "Output i-1", []string{"tool: bash {}\n\nlast", "last assistant message:\nthe answer"}, "tail"},
		{[]string{"tasks"}, "Tasks", []string{"TASK", "t-1"}, ""},
		{[]string{"accept", "t-1"}, "Accept t-1 keep_idle", []string{"accepted t-1 (keep_idle)"}, ""},
		{[]string{"accept", "--disposition=stop", "t-1"}, "Accept t-1 stop", []string{"accepted t-1 (stop)"}, ""},
		{[]string{"reject", "t-1", "use tabs"}, `Reject t-1 "use tabs"`, []string{"the worker is revising"}, "escalated"},
		{[]string{"reject", "t-1", "third strike"}, `Reject t-1 "third strike"`, []string{"escalated to a human"}, ""},
		{[]string{"trust", "list"}, "TrustList", []string{"gpu-1    steer   2026-01-02 03:04:05Z"}, ""},
		{[]string{"trust", "set", "gpu-2", "deny"}, "TrustSet gpu-2 deny", []string{"gpu-2: deny"}, ""},
		{[]string{"rebundle", "i-1", "other"}, "Rebundle i-1 other", []string{"i-1 now runs bundle other h2"}, "bundleHash"},
		{[]string{"tools", "i-1", "read,grep"}, "SetTools i-1 read|grep", []string{"i-1 tools: read,grep"}, "tools"},
		{[]string{"model", "i-1", "openrouter/anthropic/claude"}, "SetModel i-1 openrouter anthropic/claude", []string{"model: openrouter/anthropic/claude"}, ""},
		{[]string{"model", "set", "i-1", "faux/faux-2"}, "SetModel i-1 faux faux-2", []string{"model: faux/faux-2"}, ""},
		{[]string{"model", "pin", "i-1"}, "PinModel i-1 true", []string{"i-1 model pinned (faux/faux-1)"}, "pinned"},
		{[]string{"model", "unpin", "i-1"}, "PinModel i-1 false", []string{"i-1 model unpinned (faux/faux-1)"}, "pinned"},
		{[]string{"ui", "answer", "ui-1", "true"}, "UIAnswer ui-1 true", nil, ""},
		{[]string{"ui", "answer", "ui-1", "blue"}, `UIAnswer ui-1 "blue"`, nil, ""},
		{[]string{"ui", "answer", "ui-1", `"null"`}, `UIAnswer ui-1 "null"`, nil, ""},
		{[]string{"ui", "answer", "ui-1", "null"}, `UIAnswer ui-1 null`, nil, ""},
		{[]string{"spawn", "--from-session=baseline:api", "--progress=never"}, `Spawn {"fromSession":"baseline:api"}`, []string{"i-7\n"}, "instanceId"},
		{[]string{"spawn", "--from-session=/s/c.jsonl", "--attach", "--bundle=b2", "--progress=never"},
			`Spawn {"bundle":"b2","fromSession":"/s/c.jsonl","sessionMode":"attach"}`, []string{"i-7\n"}, ""},
		{[]string{"sessions"}, "Sessions machine= kind=", []string{
			"MACHINE  KIND      NAME          PINNED  UPDATED",
			"gpu-1    task      task:t-1:fix  no",
			"i-1       -      /s/clone.jsonl",
			"gpu-1    baseline  baseline:api  yes",
			"-         STALE  /s/base.jsonl",
			"mac      scratch   -             no"}, ""},
		{[]string{"sessions", "list", "--machine=gpu-1", "--kind=baseline"}, "Sessions machine=gpu-1 kind=baseline", []string{"baseline:api"}, ""},
		{[]string{"sessions", "--kind", "task"}, "Sessions machine= kind=task", nil, ""},
		{[]string{"sessions", "search", "zanzibar", "--machine=gpu-1", "--cwd=/src/app"}, `SearchSessions "zanzibar" machine=gpu-1 cwd=/src/app`,
			[]string{"MACHINE  SESSION  PATH           SNIPPET", "gpu-1    s-1      /s/base.jsonl  the zanzibar module"}, "hits"},
		{[]string{"baseline", "create", "--agent=gpu-1", "--cwd=/src/app", "--bundle=default", "--prompt=look", "--repo=api", "--settle-timeout=90s"},
			`CreateBaseline {"agent":"gpu-1","cwd":"/src/app","bundle":"default","prompt":"look","repo":"api","settleTimeoutSeconds":90}`,
			[]string{"baseline:api\npath       /s/base.jsonl\ngitHead    0123456789abcdef\ncompacted  yes\n"}, "gitHead"},
		{[]string{"resume", "task:t-1:fix", "--attach", "--machine=gpu-1", "--progress=never"},
			`Resume {"session":"task:t-1:fix","mode":"attach","machine":"gpu-1"}`, []string{"i-9\n"}, "fromSession"},
		{[]string{"resume", "baseline:api", "--bundle=b2", "--model=p/m", "--progress=never"},
			`Resume {"session":"baseline:api","bundle":"b2","model":{"provider":"p","id":"m"}}`, []string{"i-9\n"}, ""},
	} {
		status, out, errOut := runCLI(t, append(tc.args, api)...)
		if status != 0 {
			t.Errorf("%v: status %d, stderr %s", tc.args, status, errOut)
			continue
		}
		if got := b.lastCall(); got != tc.call {
			t.Errorf("%v: backend got %q, want %q", tc.args, got, tc.call)
		}
		for _, want := range tc.stdout {
			if !strings.Contains(out, want) {
				t.Errorf("%v: output lacks %q:\n%s", tc.args, want, out)
			}
		}
		if tc.jsonPath == "" {
			continue
		}
		status, out, errOut = runCLI(t, append(tc.args, api, "--json")...)
		var v map[string]any
		if err := json.Unmarshal([]byte(out), &v); status != 0 || err != nil {
			t.Errorf("%v --json: status %d, %v, stderr %s:\n%s", tc.args, status, err, errOut, out)
			continue
		}
		if _, ok := v[tc.jsonPath]; !ok {
			t.Errorf("%v --json lacks %q: %s", tc.args, tc.jsonPath, out)
		}
	}
}

func TestStdinText(t *testing.T) {
	b := &scriptedBackend{}
	api := apiServer(t, b)
	old := stdin
	stdin = strings.NewReader("a long\nprompt\n")
	defer func() { stdin = old }()
	if status, _, errOut := runCLI(t, "prompt", api, "i-1", "-"); status != 0 {
		t.Fatal(errOut)
	}
	if got := b.lastCall(); got != `Prompt i-1 "a long\nprompt" wait=false task=false` {
		t.Errorf("prompt - sent %s", got)
	}
}

func TestSpawnProgress(t *testing.T) {
	b := &scriptedBackend{progress: []controlapi.SpawnProgress{
		{Phase: "accepted"},
		{Phase: "provisioning", Bundle: "default", FilesTotal: 2000, FilesFetched: 1000, BytesFetched: 4 << 20, FilesReused: 5, BytesReused: 2048},
		{Phase: "starting", Message: "pi 0.73.1"},
	}}
	api := apiServer(t, b)
	status, out, errOut := runCLI(t, "spawn", api, "--agent=a", "--cwd=/", "--bundle=default", "--progress=always")
	if status != 0 || out != "i-7\n" {
		t.Fatalf("spawn: %d %q %s", status, out, errOut)
	}
	want := "accepted\nprovisioning default: 1000/2000 files fetched (4.0 MiB), 5 reused (2.0 KiB)\nstarting — pi 0.73.1\n"
	if !strings.HasSuffix(errOut, want) {
		t.Errorf("progress:\n%s\nwant it to end with\n%s", errOut, want)
	}
	// Not a terminal: no progress by default.
	if _, _, errOut := runCLI(t, "spawn", api, "--agent=a", "--cwd=/", "--bundle=default"); strings.Contains(errOut, "provisioning") {
		t.Errorf("progress printed off a terminal: %s", errOut)
	}
}

func TestClientErrors(t *testing.T) {
	b := &scriptedBackend{err: &controlapi.Error{Code: controlapi.CodeSpawnError, Detail: "platform_mismatch", Message: "bundle supports darwin-arm64, not linux-x64"}}
	api := apiServer(t, b)
	status, _, errOut := runCLI(t, "spawn", api, "--agent=a", "--cwd=/", "--bundle=mac-only")
	if status == 0 || !strings.Contains(errOut, "spawn_error (platform_mismatch): bundle supports darwin-arm64") {
		t.Errorf("spawn refused: %d %s", status, errOut)
	}
	for _, args := range [][]string{
		{"model", "i-1", "no-slash"},
		{"trust", "set", "m", "maybe"},
		{"accept", "--disposition=later", "t-1"},
		{"spawn", "--cwd=/", "--bundle=b"},
	} {
		if status, _, _ := runCLI(t, append(args, api)...); status == 0 {
			t.Errorf("%v: accepted", args)
		}
	}
}

func TestNotRunningMessage(t *testing.T) {
	sock := filepath.Join(socketDir(t), "control.sock")
	for _, args := range [][]string{{"status"}, {"watch"}, {"stop", "i-1"}} {
		status, out, errOut := runCLI(t, append(args, "--api=unix:"+sock)...)
		want := "pifleet-server is not running at unix:" + sock + " (start it with pifleet-server serve)"
		if status == 0 || out != "" || !strings.Contains(errOut, want) {
			t.Errorf("%v: status %d, stderr %q; want %q", args, status, errOut, want)
		}
	}
	// From the environment too.
	t.Setenv("PIFLEET_API", "unix:"+sock)
	if status, _, errOut := runCLI(t, "status"); status == 0 || !strings.Contains(errOut, "not running at unix:"+sock) {
		t.Errorf("PIFLEET_API: %d %s", status, errOut)
	}
}

func TestTCPWithToken(t *testing.T) {
	b := &scriptedBackend{status: sampleStatus()}
	dir := socketDir(t)
	tokFile := filepath.Join(dir, controlapi.TokenName)
	tok, err := controlapi.LoadOrCreateToken(tokFile)
	if err != nil {
		t.Fatal(err)
	}
	l, err := controlapi.Listen(controlapi.Addr{Network: "tcp", Address: "127.0.0.1:0"}, controlapi.ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- controlapi.Serve(ctx, l, controlapi.NewServer(b, controlapi.WithToken(tok)), time.Second)
	}()
	defer func() { cancel(); <-done }()
	api := "--api=" + l.Addr().String()
	if status, _, errOut := runCLI(t, "status", api, "--api-token-file="+tokFile); status != 0 {
		t.Errorf("with token: %s", errOut)
	}
	other := filepath.Join(dir, "other.token")
	if err := os.WriteFile(other, []byte("wrong\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if status, _, errOut := runCLI(t, "status", api, "--api-token-file="+other); status == 0 || !strings.Contains(errOut, "unauthorized") {
		t.Errorf("wrong token: %d %s", status, errOut)
	}
	if status, _, errOut := runCLI(t, "status", api, "--api-token-file="+filepath.Join(dir, "missing")); status == 0 || !strings.Contains(errOut, "token") {
		t.Errorf("missing token file: %d %s", status, errOut)
	}
}

func TestWatchOutput(t *testing.T) {
	at := time.Date(2026, 11, 29, 20, 1, 2, 0, time.Local)
	b := &scriptedBackend{changes: []controlapi.Change{
		{Kind: controlapi.ChangeAgentState, At: at, Agent: "gpu-1", From: "connecting", To: "established", Event: "hello"},
		{Kind: controlapi.ChangeEvent, At: at, InstanceID: "i-1", Event: "message_update"},
		{Kind: controlapi.ChangeInstanceState, At: at, InstanceID: "i-1", TaskID: "t-1", From: "running", To: "awaiting_review", Event: "taskDone"},
		{Kind: controlapi.ChangeDropped, At: at, Count: 7},
		{Kind: controlapi.ChangeTaskDone, At: at, InstanceID: "i-1", TaskID: "t-1", Data: json.RawMessage(`{"seq":3,"status":"settled","summary":"Fixed the \u001b[31mparser\nand its tests"}`)},
		{Kind: controlapi.ChangeUIRequest, At: at, InstanceID: "i-1", Data: json.RawMessage(`{"id":"ui-9","instanceId":"i-1","kind":"select","title":"Which branch?","message":"pick one","options":["main","dev"]}`)},
		{Kind: controlapi.ChangeUIEnded, At: at, InstanceID: "i-1", Message: "its time ran out; the worker went on with its default answer",
			Data: json.RawMessage(`{"id":"ui-9","instanceId":"i-1","kind":"select","title":"Which \u001b[2Jbranch?","options":["main","dev"]}`)},
		{Kind: controlapi.ChangeEvent, At: at, InstanceID: "i-1", Event: "tool_execution_start", Data: json.RawMessage(`{"type":"tool_execution_start","toolCallId":"c","toolName":"bash","args":{"command":"ls"}}`)},
		{Kind: controlapi.ChangeEvent, At: at, InstanceID: "i-1", Event: "message_end", Data: json.RawMessage(`{"type":"message_end","message":{"role":"assistant","content":[{"type":"thinking","thinking":"hmm"},{"type":"text","text":"two\nlines"}]}}`)},
	}}
	api := apiServer(t, b)
	status, out, errOut := runCLI(t, "watch", api)
	want := "20:01:02 agent_state    gpu-1 connecting → established (hello)\n" +
		"20:01:02 instance_state i-1 task t-1 running → awaiting_review (taskDone)\n" +
		"20:01:02 dropped        7 change(s) lost: this watch was too slow\n" +
		"20:01:02 task_done      i-1 task t-1 settled: Fixed the parser and its tests\n" +
		"20:01:02 ui_request     i-1 dialog ui-9 (select) \"Which branch?\": pick one [main, dev] — pifleet-server ui answer ui-9 VALUE\n" +
		"20:01:02 ui_ended       i-1 dialog ui-9 (select) \"Which branch?\" ended without an answer: its time ran out; the worker went on with its default answer\n"
	if out != want {
		t.Errorf("watch:\n%s\nwant\n%s", out, want)
	}
	_, out, _ = runCLI(t, "watch", api, "--events")
	wantEvents := "20:01:02 event          i-1 tool: bash {\"command\":\"ls\"}\n" +
		"20:01:02 event          i-1 thinking: hmm\n" +
		"20:01:02 event          i-1 says: two\n" +
		"                                  lines\n"
	if !strings.Contains(out, wantEvents) {
		t.Errorf("watch --events:\n%s\nwant it to contain\n%s", out, wantEvents)
	}
	// The script ends: the server closes the stream, which is an error
	// for a watch meant to run until interrupted.
	if status == 0 || !strings.Contains(errOut, "closed the stream") {
		t.Errorf("watch end: %d %s", status, errOut)
	}
	_, out, _ = runCLI(t, "watch", api, "--json", "--events")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(b.changes) {
		t.Fatalf("watch --json --events: %d lines:\n%s", len(lines), out)
	}
	for i, l := range lines {
		var c controlapi.Change
		if err := json.Unmarshal([]byte(l), &c); err != nil || c.Seq != uint64(i+1) || c.Kind != b.changes[i].Kind {
			t.Errorf("line %d = %s (%v)", i, l, err)
		}
	}
}

func TestDoctorCommand(t *testing.T) {
	b := &scriptedBackend{doctor: controlapi.DoctorReport{Checks: []controlapi.Check{
		{Name: "tailscale", Result: controlapi.CheckSkip, Detail: "static identity map in force"},
		{Name: "agent gpu-1", Result: controlapi.CheckPass, Detail: "connected"},
	}}}
	api := apiServer(t, b)
	status, out, errOut := runCLI(t, "doctor", api)
	for _, want := range []string{"PASS control api", "SKIP tailscale", "PASS agent gpu-1", "all green"} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor lacks %q:\n%s", want, out)
		}
	}
	if status != 0 {
		t.Errorf("doctor all green: status %d %s", status, errOut)
	}
	b.doctor.Checks = append(b.doctor.Checks, controlapi.Check{Name: "agent mac", Result: controlapi.CheckFail, Detail: "unreachable"})
	status, out, errOut = runCLI(t, "doctor", api)
	if status == 0 || !strings.Contains(out, "FAIL agent mac") || strings.Contains(out, "all green") || !strings.Contains(errOut, "1 of 4 checks failed") {
		t.Errorf("doctor with a failure: %d\n%s%s", status, out, errOut)
	}
	status, out, _ = runCLI(t, "doctor", api, "--json")
	var rep controlapi.DoctorReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || status == 0 || len(rep.Checks) != 4 || rep.OK() {
		t.Errorf("doctor --json: %d %v\n%s", status, err, out)
	}
	// Not running: the first check fails and says why.
	status, out, _ = runCLI(t, "doctor", "--api=unix:"+filepath.Join(socketDir(t), "none.sock"))
	if status == 0 || !strings.Contains(out, "FAIL control api") || !strings.Contains(out, "is not running at") {
		t.Errorf("doctor, server down: %d\n%s", status, out)
	}
}

// TestParse parses every command with kong as main does and checks the
// fields it fills.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		check func(c *CLI) any
		want  any
	}{
		{[]string{"status", "--json"}, func(c *CLI) any { return c.Status.JSON }, true},
		{[]string{"status"}, func(c *CLI) any { return c.Status.API }, "unix:/state/control.sock"},
		{[]string{"status", "--api=127.0.0.1:9789"}, func(c *CLI) any { return c.Status.API }, "127.0.0.1:9789"},
		{[]string{"spawn", "--agent=a", "--cwd=/w", "--bundle=b", "--pin=h"}, func(c *CLI) any {
			return []string{c.Spawn.Agent, c.Spawn.Cwd, c.Spawn.Bundle, c.Spawn.Pin, c.Spawn.Progress}
		}, []string{"a", "/w", "b", "h", "auto"}},
		{[]string{"prompt", "--wait", "--task", "i-1", "do it"}, func(c *CLI) any {
			return []any{c.Prompt.Instance, c.Prompt.Text, c.Prompt.Wait, c.Prompt.Task}
		}, []any{"i-1", "do it", true, true}},
		{[]string{"steer", "i-1", "x"}, func(c *CLI) any { return c.Steer.Instance + " " + c.Steer.Text }, "i-1 x"},
		{[]string{"abort", "i-1"}, func(c *CLI) any { return c.Abort.Instance }, "i-1"},
		{[]string{"stop", "i-1"}, func(c *CLI) any { return c.Stop.Instance }, "i-1"},
		{[]string{"output", "i-1", "--json"}, func(c *CLI) any { return c.Output.JSON }, true},
		{[]string{"tasks"}, func(c *CLI) any { return c.Tasks.JSON }, false},
		{[]string{"accept", "t-1"}, func(c *CLI) any { return c.Accept.Disposition }, "keep_idle"},
		{[]string{"accept", "--disposition", "stop", "t-1"}, func(c *CLI) any { return c.Accept.Disposition }, "stop"},
		{[]string{"reject", "t-1", "more tests"}, func(c *CLI) any { return c.Reject.Feedback }, "more tests"},
		{[]string{"trust", "list"}, func(c *CLI) any { return c.Trust.List.JSON }, false},
		{[]string{"trust", "set", "m", "allow"}, func(c *CLI) any { return c.Trust.Set.Machine + "=" + c.Trust.Set.Policy }, "m=allow"},
		{[]string{"watch", "--events"}, func(c *CLI) any { return c.Watch.Events }, true},
		{[]string{"rebundle", "i-1", "b2"}, func(c *CLI) any { return c.Rebundle.Bundle }, "b2"},
		{[]string{"tools", "i-1", "read,grep,bash"}, func(c *CLI) any { return c.Tools.list() }, []string{"read", "grep", "bash"}},
		{[]string{"tools", "i-1", " read, ,bash,"}, func(c *CLI) any { return c.Tools.list() }, []string{"read", "bash"}},
		{[]string{"tools", "i-1", ""}, func(c *CLI) any { return c.Tools.list() }, []string{}},
		{[]string{"model", "i-1", "p/m"}, func(c *CLI) any { return c.Model.Set.Model }, "p/m"},
		{[]string{"model", "pin", "i-1", "--json"}, func(c *CLI) any { return c.Model.Pin.Instance + fmt.Sprint(c.Model.Pin.JSON) }, "i-1true"},
		{[]string{"ui", "answer", "r-1", "yes"}, func(c *CLI) any { return c.UI.Answer.Request + ":" + c.UI.Answer.Value }, "r-1:yes"},
		{[]string{"doctor"}, func(c *CLI) any { return c.Doctor.Timeout }, 30 * time.Second},
		{[]string{"spawn", "--from-session=baseline:api", "--attach"}, func(c *CLI) any {
			return []any{c.Spawn.FromSession, c.Spawn.Attach, c.Spawn.Agent}
		}, []any{"baseline:api", true, ""}},
		{[]string{"sessions"}, func(c *CLI) any { return c.Sessions.List.Kind }, ""},
		{[]string{"sessions", "--kind=baseline", "--machine=m", "--json"}, func(c *CLI) any {
			return []any{c.Sessions.List.Kind, c.Sessions.List.Machine, c.Sessions.List.JSON}
		}, []any{"baseline", "m", true}},
		{[]string{"sessions", "search", "flaky tests", "--cwd=/r"}, func(c *CLI) any {
			return c.Sessions.Search.Query + "@" + c.Sessions.Search.Cwd
		}, "flaky tests@/r"},
		{[]string{"baseline", "create", "--agent=a", "--cwd=/r", "--bundle=b", "--compact-timeout=1m"}, func(c *CLI) any {
			return []any{c.Baseline.Create.Agent, c.Baseline.Create.CompactTimeout, c.Baseline.Create.SettleTimeout}
		}, []any{"a", time.Minute, time.Duration(0)}},
		{[]string{"resume", "task:t-1:x", "--attach", "--bundle=b"}, func(c *CLI) any {
			return []any{c.Resume.Session, c.Resume.Attach, c.Resume.Bundle, c.Resume.Progress}
		}, []any{"task:t-1:x", true, "b", "auto"}},
		{[]string{"serve", "--agent=a=127.0.0.1:1", "--agent", "b=127.0.0.1:2,127.0.0.1:3", "--whois-static=127.0.0.1=box", "--api=127.0.0.1:0"},
			func(c *CLI) any {
				return []any{c.Serve.Agent, c.Serve.WhoisStatic, c.Serve.API, c.Serve.StateDir, c.Serve.TailnetPort}
			}, []any{[]string{"a=127.0.0.1:1", "b=127.0.0.1:2,127.0.0.1:3"}, []string{"127.0.0.1=box"}, "127.0.0.1:0", "/state", 9788}},
	} {
		var c CLI
		p, err := kong.New(&c, kong.Vars{"default_registry": "/reg"}, kong.Vars(apiVars("/state")))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Parse(tc.args); err != nil {
			t.Errorf("%v: %v", tc.args, err)
			continue
		}
		if diff := cmp.Diff(tc.want, tc.check(&c)); diff != "" {
			t.Errorf("%v (-want +got):\n%s", tc.args, diff)
		}
	}
}

func TestParseFromEnvironment(t *testing.T) {
	t.Setenv("PIFLEET_AGENTS", "a=127.0.0.1:1;b=127.0.0.1:2")
	t.Setenv("PIFLEET_API", "unix:/x.sock")
	t.Setenv("PIFLEET_DISPOSITION", "stop")
	var c CLI
	p, err := kong.New(&c, kong.Vars{"default_registry": "/reg"}, kong.Vars(apiVars("/state")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Parse([]string{"serve"}); err != nil {
		t.Fatal(err)
	}
	if !cmp.Equal(c.Serve.Agent, []string{"a=127.0.0.1:1", "b=127.0.0.1:2"}) || c.Serve.API != "unix:/x.sock" {
		t.Errorf("serve from env: %+v", c.Serve)
	}
	if _, err := p.Parse([]string{"accept", "t"}); err != nil || c.Accept.Disposition != "stop" || c.Accept.API != "unix:/x.sock" {
		t.Errorf("accept from env: %+v %v", c.Accept, err)
	}
}

func (b *scriptedBackend) Diff(_ context.Context, id string, q controlapi.DiffQuery) (controlapi.FileResult, error) {
	return b.file, b.record("Diff %s ref=%s staged=%v stat=%v", id, q.Ref, q.Staged, q.Stat)
}

func (b *scriptedBackend) ReadFile(_ context.Context, id string, q controlapi.ReadQuery) (controlapi.FileResult, error) {
	return b.file, b.record("ReadFile %s %s offset=%d limit=%d", id, q.Path, q.Offset, q.Limit)
}

func (b *scriptedBackend) ListDir(_ context.Context, id, path string) (controlapi.FileResult, error) {
	return b.file, b.record("ListDir %s %q", id, path)
}

func (b *scriptedBackend) Grep(_ context.Context, id string, q controlapi.GrepQuery) (controlapi.FileResult, error) {
	return b.file, b.record("Grep %s %q glob=%q", id, q.Pattern, q.Glob)
}

func (b *scriptedBackend) Retry(_ context.Context, agent string) error {
	return b.record("Retry %s", agent)
}
