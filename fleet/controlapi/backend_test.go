package controlapi

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
)

// recordingBackend is the test double of Backend: it records each call as
// one line ("Prompt i-1 {...}") and answers with what the test set.
type recordingBackend struct {
	mu    sync.Mutex
	calls []string

	// err, when set, is returned by every method.
	err error
	// spawnProgress is streamed before Spawn answers; spawnErr then
	// fails it.
	spawnProgress []SpawnProgress
	spawnErr      error

	status     Status
	output     Output
	tasks      []Task
	trust      []TrustDecision
	doctor     DoctorReport
	prompt     PromptResult
	reject     RejectResult
	rebundle   RebundleResult
	sessions   []Session
	search     SearchResult
	baseline   Baseline
	resume     SpawnResult
	transcript Transcript
	file       FileResult

	execScript

	// changes feeds Watch; watchCtx receives each Watch's context.
	changes  chan Change
	watchCtx chan context.Context
}

func newRecordingBackend() *recordingBackend {
	return &recordingBackend{changes: make(chan Change), watchCtx: make(chan context.Context, 4)}
}

func (b *recordingBackend) record(format string, args ...any) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, fmt.Sprintf(format, args...))
	return b.err
}

func (b *recordingBackend) Calls() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.calls, "\n")
}

func js(v any) string {
	out, _ := json.Marshal(v)
	return string(out)
}

func (b *recordingBackend) Transcript(_ context.Context, id string, limit int) (Transcript, error) {
	return b.transcript, b.record("Transcript %s %d", id, limit)
}

func (b *recordingBackend) Status(context.Context) (Status, error) {
	return b.status, b.record("Status")
}

func (b *recordingBackend) Spawn(_ context.Context, req SpawnRequest, progress func(SpawnProgress)) (SpawnResult, error) {
	if err := b.record("Spawn %s", js(req)); err != nil {
		return SpawnResult{}, err
	}
	for _, p := range b.spawnProgress {
		progress(p)
	}
	if b.spawnErr != nil {
		return SpawnResult{}, b.spawnErr
	}
	return SpawnResult{InstanceID: "i-1", TraceID: "tr-1"}, nil
}

func (b *recordingBackend) Prompt(_ context.Context, id string, req PromptRequest) (PromptResult, error) {
	return b.prompt, b.record("Prompt %s %s", id, js(req))
}

func (b *recordingBackend) Steer(_ context.Context, id, text string) error {
	return b.record("Steer %s %q", id, text)
}

func (b *recordingBackend) Abort(_ context.Context, id string) error { return b.record("Abort %s", id) }
func (b *recordingBackend) Stop(_ context.Context, id string) error  { return b.record("Stop %s", id) }

func (b *recordingBackend) Output(_ context.Context, id string) (Output, error) {
	return b.output, b.record("Output %s", id)
}

func (b *recordingBackend) Tasks(context.Context) ([]Task, error) { return b.tasks, b.record("Tasks") }

func (b *recordingBackend) Accept(_ context.Context, id string, d Disposition) error {
	return b.record("Accept %s %s", id, d)
}

func (b *recordingBackend) Reject(_ context.Context, id, feedback string) (RejectResult, error) {
	return b.reject, b.record("Reject %s %q", id, feedback)
}

func (b *recordingBackend) TrustList(context.Context) ([]TrustDecision, error) {
	return b.trust, b.record("TrustList")
}

func (b *recordingBackend) TrustSet(_ context.Context, machine string, p Policy) (TrustDecision, error) {
	return TrustDecision{Machine: machine, Policy: p}, b.record("TrustSet %s %s", machine, p)
}

func (b *recordingBackend) Watch(ctx context.Context) (<-chan Change, error) {
	if err := b.record("Watch"); err != nil {
		return nil, err
	}
	b.watchCtx <- ctx
	out := make(chan Change)
	go func() {
		defer close(out)
		for {
			select {
			case <-ctx.Done():
				return
			case c := <-b.changes:
				select {
				case out <- c:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out, nil
}

func (b *recordingBackend) Rebundle(_ context.Context, id, bundle string) (RebundleResult, error) {
	return b.rebundle, b.record("Rebundle %s %s", id, bundle)
}

func (b *recordingBackend) SetTools(_ context.Context, id string, tools []string) ([]string, error) {
	return tools, b.record("SetTools %s %s", id, js(tools))
}

func (b *recordingBackend) SetModel(_ context.Context, id string, m ModelRef) error {
	return b.record("SetModel %s %s", id, js(m))
}

func (b *recordingBackend) PinModel(_ context.Context, id string, pin bool) (ModelPin, error) {
	return ModelPin{InstanceID: id, Pinned: pin, Model: &ModelRef{Provider: "faux", ID: "faux-1"}}, b.record("PinModel %s %v", id, pin)
}

func (b *recordingBackend) UIAnswer(_ context.Context, id string, value json.RawMessage) error {
	return b.record("UIAnswer %s %s", id, value)
}

func (b *recordingBackend) Doctor(context.Context) (DoctorReport, error) {
	return b.doctor, b.record("Doctor")
}

func (b *recordingBackend) Sessions(_ context.Context, f SessionFilter) ([]Session, error) {
	return b.sessions, b.record("Sessions machine=%q kind=%q", f.Machine, f.Kind)
}

func (b *recordingBackend) SearchSessions(_ context.Context, q SessionSearch) (SearchResult, error) {
	return b.search, b.record("SearchSessions q=%q machine=%q cwd=%q", q.Query, q.Machine, q.Cwd)
}

func (b *recordingBackend) CreateBaseline(_ context.Context, req BaselineRequest) (Baseline, error) {
	return b.baseline, b.record("CreateBaseline %s", js(req))
}

func (b *recordingBackend) Resume(_ context.Context, req ResumeRequest, progress func(SpawnProgress)) (SpawnResult, error) {
	if err := b.record("Resume %s", js(req)); err != nil {
		return SpawnResult{}, err
	}
	for _, p := range b.spawnProgress {
		progress(p)
	}
	if b.spawnErr != nil {
		return SpawnResult{}, b.spawnErr
	}
	return b.resume, nil
}

func (b *recordingBackend) Diff(_ context.Context, id string, q DiffQuery) (FileResult, error) {
	return b.file, b.record("Diff %s %s", id, js(q))
}

func (b *recordingBackend) ReadFile(_ context.Context, id string, q ReadQuery) (FileResult, error) {
	return b.file, b.record("ReadFile %s %s", id, js(q))
}

func (b *recordingBackend) ListDir(_ context.Context, id, path string) (FileResult, error) {
	return b.file, b.record("ListDir %s %q", id, path)
}

func (b *recordingBackend) Grep(_ context.Context, id string, q GrepQuery) (FileResult, error) {
	return b.file, b.record("Grep %s %s", id, js(q))
}

func (b *recordingBackend) Retry(_ context.Context, agent string) error {
	return b.record("Retry %s", agent)
}
