package controlapi

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// execScript is what recordingBackend's exec methods answer.
type execScript struct {
	execOutputs []ExecOutput
	execResult  ExecResult
	execList    []Execution
	// execCtx receives the context of each Exec (a client going away
	// ends it).
	execCtx chan context.Context
}

func (b *recordingBackend) Exec(ctx context.Context, req ExecRequest, started func(ExecStarted), output func(ExecOutput)) (ExecResult, error) {
	if err := b.record("Exec %s", js(req)); err != nil {
		return ExecResult{}, err
	}
	if started != nil {
		started(ExecStarted{Machine: b.execResult.Machine, ExecID: b.execResult.ExecID})
	}
	for _, o := range b.execOutputs {
		if output != nil {
			output(o)
		}
	}
	if b.execCtx != nil {
		b.execCtx <- ctx
		<-ctx.Done()
		return ExecResult{}, ctx.Err()
	}
	return b.execResult, nil
}

func (b *recordingBackend) ExecAbort(_ context.Context, machine, id string) error {
	return b.record("ExecAbort %s %s", machine, id)
}

func (b *recordingBackend) Executions(_ context.Context, machine string) ([]Execution, error) {
	return b.execList, b.record("Executions %s", machine)
}

func TestExecRoundTrip(t *testing.T) {
	b := newRecordingBackend()
	code := 3
	b.execResult = ExecResult{Machine: "gpu-1", ExecID: "x-1", ExitCode: &code, Stdout: "ok\n", DurationMs: 12}
	b.execOutputs = []ExecOutput{{Seq: 0, Stream: "stdout", Data: []byte("o\x00k\n")}, {Seq: 1, Stream: "stderr", Data: []byte("\x1b[31m")}}
	b.execList = []Execution{{ExecID: "x-1", Mode: "argv", Cwd: "/src", State: "exited", ExitCode: &code}}
	c := client(t, serve(t, b, DefaultAddr(shortDir(t))))
	ctx := context.Background()

	res, err := c.Exec(ctx, ExecRequest{Machine: "gpu-1", Argv: []string{"go", "test"}, Cwd: "/src"}, nil)
	if err != nil || cmp.Diff(b.execResult, res) != "" {
		t.Errorf("Exec = %+v, %v", res, err)
	}
	var got []ExecOutput
	res, err = c.Exec(ctx, ExecRequest{InstanceID: "i-1", Shell: "make"}, func(o ExecOutput) { got = append(got, o) })
	if err != nil || res.ExecID != "x-1" {
		t.Errorf("streamed Exec = %+v, %v", res, err)
	}
	if diff := cmp.Diff(b.execOutputs, got); diff != "" {
		t.Errorf("chunks (-sent +received):\n%s", diff)
	}
	if err := c.ExecAbort(ctx, "gpu-1", "x-1"); err != nil {
		t.Error(err)
	}
	l, err := c.Executions(ctx, "gpu-1")
	if err != nil || cmp.Diff(b.execList, l) != "" {
		t.Errorf("Executions = %+v, %v", l, err)
	}
	want := strings.Join([]string{
		`Exec {"machine":"gpu-1","argv":["go","test"],"cwd":"/src"}`,
		`Exec {"instanceId":"i-1","shell":"make"}`,
		`ExecAbort gpu-1 x-1`,
		`Executions gpu-1`,
	}, "\n")
	if b.Calls() != want {
		t.Errorf("calls:\n%s\nwant:\n%s", b.Calls(), want)
	}
}

func TestExecBadRequests(t *testing.T) {
	b := newRecordingBackend()
	c := client(t, serve(t, b, DefaultAddr(shortDir(t))))
	for _, req := range []ExecRequest{
		{Argv: []string{"ls"}, Cwd: "/"},                            // nowhere
		{Machine: "m", Cwd: "/"},                                    // no command
		{Machine: "m", Argv: []string{"ls"}, Shell: "ls", Cwd: "/"}, // both
		{Machine: "m", Argv: []string{"ls"}},                        // no cwd
		{Machine: "m", Argv: []string{"ls"}, Cwd: "/", TimeoutSeconds: -1},
	} {
		if _, err := c.Exec(context.Background(), req, nil); !errors.Is(err, ErrBadRequest) {
			t.Errorf("%+v: %v", req, err)
		}
	}
	if _, err := c.Executions(context.Background(), ""); !errors.Is(err, ErrBadRequest) {
		t.Errorf("no machine: %v", err)
	}
	if b.Calls() != "" {
		t.Errorf("backend called: %s", b.Calls())
	}
	if CodeExecRefused.HTTPStatus() != http.StatusUnprocessableEntity {
		t.Error("exec_refused status")
	}
}

// A client that goes away ends the backend's Exec (which aborts the
// command).
func TestExecClientGoneEndsTheCall(t *testing.T) {
	b := newRecordingBackend()
	b.execCtx = make(chan context.Context, 1)
	c := client(t, serve(t, b, DefaultAddr(shortDir(t))))
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := c.Exec(ctx, ExecRequest{Machine: "m", Shell: "sleep 300", Cwd: "/"}, func(ExecOutput) {})
		errc <- err
	}()
	bctx := <-b.execCtx
	cancel()
	<-bctx.Done()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("client: %v", err)
	}
}

func (b *recordingBackend) TaskDiff(_ context.Context, id string, stat bool) (FileResult, error) {
	text := "+change"
	return FileResult{Text: &text}, b.record("TaskDiff %s %v", id, stat)
}

func (b *recordingBackend) Deliver(_ context.Context, id string, req DeliverRequest) (Delivery, error) {
	return Delivery{Mode: req.Mode, Branch: "pifleet/" + id, Commit: "c0ffee"}, b.record("Deliver %s %s", id, js(req))
}

// The worktree endpoints: a task's diff, a delivery, and an accept that
// delivers first (and does not accept when the delivery fails).
func TestWorktreeRoundTrip(t *testing.T) {
	b := newRecordingBackend()
	c := client(t, serve(t, b, DefaultAddr(shortDir(t))))
	ctx := context.Background()
	if r, err := c.TaskDiff(ctx, "t-1", true); err != nil || r.Text == nil || *r.Text != "+change" {
		t.Errorf("TaskDiff %+v %v", r, err)
	}
	if d, err := c.Deliver(ctx, "t-1", DeliverRequest{Mode: "merge", Target: "main"}); err != nil || d.Commit != "c0ffee" {
		t.Errorf("Deliver %+v %v", d, err)
	}
	if _, err := c.Deliver(ctx, "t-1", DeliverRequest{Mode: "pr"}); !errors.Is(err, ErrBadRequest) {
		t.Errorf("pr: %v", err)
	}
	if err := c.AcceptWith(ctx, "t-1", AcceptRequest{Disposition: DispositionStop, Deliver: "branch"}); err != nil {
		t.Error(err)
	}
	if _, err := c.Diff(ctx, "i-1", DiffQuery{Base: true}); err != nil {
		t.Error(err)
	}
	want := strings.Join([]string{
		`TaskDiff t-1 true`,
		`Deliver t-1 {"mode":"merge","target":"main"}`,
		`Deliver t-1 {"mode":"branch"}`,
		`Accept t-1 stop`,
	}, "\n")
	if got := b.Calls(); !strings.HasPrefix(got, want) || !strings.Contains(got, `"Base":true`) {
		t.Errorf("calls:\n%s\nwant:\n%s", got, want)
	}
	b.err = &Error{Code: CodeDeliveryFailed, Message: "conflict", Detail: "merge_conflict"}
	if err := c.AcceptWith(ctx, "t-1", AcceptRequest{Deliver: "merge"}); !errors.Is(err, ErrDeliveryFailed) {
		t.Errorf("failed delivery: %v", err)
	}
	if strings.Count(b.Calls(), "Accept") != 1 {
		t.Errorf("accepted after a failed delivery:\n%s", b.Calls())
	}
}
