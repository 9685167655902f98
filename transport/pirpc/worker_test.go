package pirpc_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"example.com/pifleet/internal/pitest"
	"example.com/pifleet/transport/pirpc"
	"github.com/google/go-cmp/cmp"
)

// label names a line the way pi-rpc.md writes event sequences. Responses
// are left out: pi answers commands concurrently, so their place among the
// events is not part of the protocol.
func label(l pirpc.Line) string {
	if l.Settled != nil {
		return "SETTLED"
	}
	ev := l.Event
	if ev == nil {
		return ""
	}
	switch ev.Type {
	case pirpc.EventMessageStart, pirpc.EventMessageEnd:
		s := string(ev.Type) + "(" + ev.Message.Role
		if ev.Message.Role == pirpc.RoleAssistant && ev.Type == pirpc.EventMessageEnd {
			s += "," + ev.Message.StopReason
		}
		return s + ")"
	case pirpc.EventMessageUpdate:
		return "update." + ev.Update.Type
	case pirpc.EventToolExecutionStart, pirpc.EventToolExecutionUpdate, pirpc.EventToolExecutionEnd:
		return string(ev.Type) + "(" + ev.Tool.ToolName + ")"
	case pirpc.EventExtensionUIRequest:
		return "ui_request(" + ev.UIRequest.Method + ")"
	}
	return string(ev.Type)
}

func labels(lines []pirpc.Line) []string {
	var out []string
	for _, l := range lines {
		if s := label(l); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func settles(lines []pirpc.Line) []*pirpc.Settle {
	var out []*pirpc.Settle
	for _, l := range lines {
		if l.Settled != nil {
			out = append(out, l.Settled)
		}
	}
	return out
}

func tally(lines []pirpc.Line) pirpc.Tally {
	var t pirpc.Tally
	for _, l := range lines {
		if l.Event != nil {
			t.Observe(l.Event)
		}
	}
	return t
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), pitest.DefaultWait)
	t.Cleanup(cancel)
	return ctx
}

// promptSettled sends a prompt and returns its lines up to the settle.
func promptSettled(t *testing.T, w *pitest.Worker, msg string) []pirpc.Line {
	t.Helper()
	if err := w.Client.Prompt(ctxFor(t), msg); err != nil {
		t.Fatalf("prompt %q: %v", msg, err)
	}
	return w.UntilSettled(t)
}

func entriesOfType(entries []map[string]any, typ string) []map[string]any {
	var out []map[string]any
	for _, e := range entries {
		if e["type"] == typ {
			out = append(out, e)
		}
	}
	return out
}

// The scenarios whose event sequences must be the same for both workers.
const (
	scnTools      = "tool call"
	scnRetry      = "auto-retry"
	scnQueue      = "queued steer and follow-up"
	scnUI         = "extension UI"
	scnCompaction = "resume, then threshold compaction"
)

// TestWorkers drives both workers through the flows pifleet relies on, and
// then checks that the scripted worker's event sequences equal real pi's.
// Each kind uses two processes (one, then a second resuming its session):
// real pi needs about a second per start.
func TestWorkers(t *testing.T) {
	seqs := map[pitest.Kind]map[string][]string{}
	for _, kind := range pitest.Kinds() {
		t.Run(kind.String(), func(t *testing.T) {
			seqs[kind] = exerciseWorker(t, kind)
		})
	}
	t.Run("scripted worker matches real pi", func(t *testing.T) {
		real, scripted := seqs[pitest.RealPi], seqs[pitest.Scripted]
		if real == nil {
			t.Skip(pitest.SkipMessage)
		}
		if scripted == nil {
			t.Fatal("the scripted worker's run failed")
		}
		for _, name := range []string{scnTools, scnRetry, scnQueue, scnUI, scnCompaction} {
			if diff := cmp.Diff(real[name], scripted[name]); diff != "" {
				t.Errorf("%s: event sequences differ (-real pi +scripted):\n%s", name, diff)
			}
		}
	})
}

func exerciseWorker(t *testing.T, kind pitest.Kind) map[string][]string {
	const cost = 0.25
	seq := map[string][]string{}
	w := pitest.Start(t, kind, pitest.Options{Env: []string{fmt.Sprintf("PIFLEET_FAUX_COST=%v", cost)}})
	ctx := ctxFor(t)

	st, err := w.Client.GetState(ctx)
	if err != nil {
		t.Fatalf("get_state: %v", err)
	}
	t.Logf("%s: first answer %v after start", kind, time.Since(w.Started).Round(time.Millisecond))
	if st.Model == nil || st.Model.Provider != "faux" || st.Model.ID != "faux-1" || st.IsStreaming {
		t.Fatalf("state %+v", st)
	}
	if filepath.Dir(st.SessionFile) != w.Spec.SessionDir || !strings.HasSuffix(st.SessionFile, "_"+st.SessionID+".jsonl") {
		t.Fatalf("sessionFile %q (session dir %s, id %s)", st.SessionFile, w.Spec.SessionDir, st.SessionID)
	}
	firstFile := st.SessionFile

	t.Run(scnTools, func(t *testing.T) {
		lines := promptSettled(t, w, "bash: echo hi\nwrite: out.txt hello")
		seq[scnTools] = labels(lines)
		got := labels(lines)
		// Parallel tool calls finish in any order; everything else is fixed.
		head := []string{"agent_start", "turn_start", "message_start(user)", "message_end(user)", "message_start(assistant)",
			"update.toolcall_start", "update.toolcall_delta"}
		if diff := cmp.Diff(head, got[:len(head)]); diff != "" {
			t.Errorf("start of the run (-want +got):\n%s", diff)
		}
		tail := []string{"message_start(toolResult)", "message_end(toolResult)", "message_start(toolResult)", "message_end(toolResult)",
			"turn_end", "turn_start", "message_start(assistant)", "update.text_start", "update.text_delta"}
		if i := slices.Index(got, "message_start(toolResult)"); i < 0 || !slices.Equal(got[i:i+len(tail)], tail) {
			t.Errorf("tool results and second turn out of order: %v", got)
		}
		end := []string{"update.text_end", "message_end(assistant,stop)", "turn_end", "agent_end", "SETTLED"}
		if !slices.Equal(got[len(got)-len(end):], end) {
			t.Errorf("end of the run: %v", got[len(got)-len(end):])
		}
		starts := slices.Index(got, "tool_execution_start(bash)")
		if starts < 0 || got[starts+1] != "tool_execution_start(write)" {
			t.Errorf("both tool_execution_start must come first: %v", got)
		}
		if n := len(settles(lines)); n != 1 {
			t.Errorf("%d settles", n)
		}
		tl := tally(lines)
		want := "faux: tool results: bash=hi; write=Successfully wrote 5 bytes to out.txt"
		if tl.LastAssistantText != want || tl.Turns != 2 || tl.ToolCalls != 2 || tl.FilesChanged() != 1 || tl.Cost != 2*cost {
			t.Errorf("tally %+v, want text %q, 2 turns, 2 tool calls, 1 file, cost %v", tl, want, 2*cost)
		}
		if b, err := os.ReadFile(filepath.Join(w.Spec.Dir, "out.txt")); err != nil || string(b) != "hello" {
			t.Errorf("out.txt: %q %v", b, err)
		}
		// Sequence comparison keeps the deterministic part only.
		seq[scnTools] = slices.DeleteFunc(seq[scnTools], func(s string) bool { return strings.HasPrefix(s, "tool_execution_") })
	})

	t.Run("prompt right after the settle", func(t *testing.T) {
		// Settled means idle: the next prompt must be accepted at once.
		for i := range 3 {
			lines := promptSettled(t, w, fmt.Sprintf("say: again %d", i))
			if got := tally(lines).LastAssistantText; got != fmt.Sprintf("again %d", i) {
				t.Fatalf("reply %q", got)
			}
		}
	})

	t.Run(scnRetry, func(t *testing.T) {
		lines := promptSettled(t, w, "fail: 1 503 overloaded\nsay: recovered")
		got := labels(lines)
		seq[scnRetry] = got
		endFailed := slices.Index(got, "agent_end")
		if endFailed < 0 || got[endFailed+1] != "auto_retry_start" || got[endFailed-2] != "message_end(assistant,error)" {
			t.Fatalf("no failed attempt followed by auto_retry_start: %v", got)
		}
		if n := len(settles(lines)); n != 1 || got[len(got)-1] != "SETTLED" || got[len(got)-2] != "agent_end" {
			t.Fatalf("must settle once, after the retry's agent_end: %v", got)
		}
		if !slices.Contains(got, "auto_retry_end") {
			t.Errorf("no auto_retry_end: %v", got)
		}
		if tl := tally(lines); tl.LastAssistantText != "recovered" || tl.LastStopReason != pirpc.StopReasonStop {
			t.Errorf("tally %+v", tl)
		}

		// Retries exhausted (maxRetries 3): auto_retry_end comes after the
		// last agent_end, and the run settles after it.
		lines = promptSettled(t, w, "error: 503 overloaded")
		got = labels(lines)
		if strings.Count(strings.Join(got, " "), "auto_retry_start") != 3 || len(settles(lines)) != 1 {
			t.Fatalf("exhausted retries: %v", got)
		}
		if tail := got[len(got)-3:]; !slices.Equal(tail, []string{"agent_end", "auto_retry_end", "SETTLED"}) {
			t.Fatalf("exhausted retries end with %v", tail)
		}
	})

	t.Run("abort mid-run", func(t *testing.T) {
		if err := w.Client.Prompt(ctx, "delay: 100\nsay: "+strings.Repeat("slow words ", 20)); err != nil {
			t.Fatal(err)
		}
		w.Until(t, func(l pirpc.Line) bool {
			return l.Event != nil && l.Event.Update != nil && l.Event.Update.Type == "text_delta"
		})
		if err := w.Client.Abort(ctx); err != nil {
			t.Fatalf("abort: %v", err)
		}
		lines := w.UntilSettled(t)
		s := settles(lines)
		if len(s) != 1 || !s[0].Aborted {
			t.Fatalf("settles %+v", s)
		}
		if tl := tally(lines); tl.LastStopReason != pirpc.StopReasonAborted {
			t.Errorf("last stop reason %q", tl.LastStopReason)
		}
		if st, err := w.Client.GetState(ctx); err != nil || st.IsStreaming {
			t.Errorf("after abort: %+v %v", st, err)
		}
	})

	t.Run(scnQueue, func(t *testing.T) {
		for _, cmd := range []pirpc.Command{pirpc.Steer{Message: "say: steered"}, pirpc.FollowUp{Message: "say: followed"}} {
			if _, err := w.Client.Call(ctx, cmd); err != nil {
				t.Fatal(err)
			}
		}
		st, err := w.Client.GetState(ctx)
		if err != nil || st.PendingMessageCount != 2 {
			t.Fatalf("pending %+v %v", st, err)
		}
		lines := promptSettled(t, w, "say: main")
		seq[scnQueue] = labels(lines)
		if n := strings.Count(strings.Join(seq[scnQueue], " "), "agent_end"); n != 1 {
			t.Errorf("queued messages must stay in one run, got %d agent_end", n)
		}
		if tl := tally(lines); tl.LastAssistantText != "followed" {
			t.Errorf("last text %q", tl.LastAssistantText)
		}
	})

	t.Run(scnUI, func(t *testing.T) {
		done := make(chan error, 1)
		go func() { done <- w.Client.Prompt(ctx, "/faux-ui") }()
		lines := w.Until(t, func(l pirpc.Line) bool { return l.Event != nil && l.Event.UIRequest != nil })
		req := lines[len(lines)-1].Event.UIRequest
		if req.Method != "confirm" || !req.IsDialog() || req.Title != "faux-ui" {
			t.Fatalf("request %+v", req)
		}
		if _, err := w.Client.Call(ctx, pirpc.ExtensionUIResponse{ID: req.ID, Confirmed: new(true)}); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, w.Until(t, func(l pirpc.Line) bool { return l.Response != nil && l.Own })...)
		if err := <-done; err != nil {
			t.Fatalf("prompt: %v", err)
		}
		seq[scnUI] = labels(lines)
		var notify *pirpc.UIRequest
		for _, l := range lines {
			if l.Event != nil && l.Event.UIRequest != nil && l.Event.UIRequest.Method == "notify" {
				notify = l.Event.UIRequest
			}
		}
		if notify == nil || notify.Message != "faux-ui: confirmed" {
			t.Fatalf("notify %+v", notify)
		}
	})

	t.Run("session name and clone", func(t *testing.T) {
		if _, err := w.Client.Call(ctx, pirpc.SetSessionName{Name: "  "}); err == nil {
			t.Error("a blank name was accepted")
		}
		if _, err := w.Client.Call(ctx, pirpc.SetSessionName{Name: "pifleet test"}); err != nil {
			t.Fatal(err)
		}
		w.Until(t, func(l pirpc.Line) bool { return l.Event != nil && l.Event.Type == pirpc.EventSessionInfoChanged })
		_, entries := pitest.SessionEntries(t, firstFile)
		info := entriesOfType(entries, "session_info")
		if len(info) != 1 || info[0]["name"] != "pifleet test" {
			t.Fatalf("session_info entries %v", info)
		}
		if ui := entriesOfType(entries, "custom"); len(ui) != 1 || ui[0]["customType"] != "faux-ui" {
			t.Errorf("custom entries %v", ui)
		}
		// Every entry's parent is the entry before it (no branching here).
		for i, e := range entries {
			if i > 0 && e["parentId"] != entries[i-1]["id"] {
				t.Fatalf("entry %d: parentId %v, previous id %v", i, e["parentId"], entries[i-1]["id"])
			}
		}

		if _, err := pirpc.Do[pirpc.Cancelled](ctx, w.Client, pirpc.Clone{}); err != nil {
			t.Fatal(err)
		}
		st, err := w.Client.GetState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.SessionFile == firstFile || st.SessionName != "pifleet test" {
			t.Fatalf("after clone: file %s, name %q", st.SessionFile, st.SessionName)
		}
		header, cloned := pitest.SessionEntries(t, st.SessionFile)
		if header["parentSession"] != firstFile || header["version"] != float64(3) || len(cloned) != len(entries) {
			t.Fatalf("clone header %v with %d entries (original %d)", header, len(cloned), len(entries))
		}
	})

	t.Run("unknown command is unsupported", func(t *testing.T) {
		_, err := w.Client.Call(ctx, pirpc.GetEntries{})
		if !errors.Is(err, pirpc.ErrUnsupported) {
			t.Fatalf("get_entries: %v", err)
		}
		// The client is still in step: the next call gets its own answer.
		if _, err := pirpc.Do[pirpc.SessionStats](ctx, w.Client, pirpc.GetSessionStats{}); err != nil {
			t.Fatal(err)
		}
	})
	w.Stop(t)

	t.Run(scnCompaction, func(t *testing.T) {
		_, before := pitest.SessionEntries(t, firstFile)
		// A context window just above pi's 16384-token reserve: any reply
		// crosses the compaction threshold.
		r := pitest.Start(t, kind, pitest.Options{Session: firstFile, AgentDir: w.Spec.AgentDir, Cwd: w.Spec.Dir,
			Env: []string{"PIFLEET_FAUX_CONTEXT_WINDOW=16385"}})
		msgs, err := pirpc.Do[pirpc.Messages](ctx, r.Client, pirpc.GetMessages{})
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs.Messages) == 0 || msgs.Messages[0].Text() != "bash: echo hi\nwrite: out.txt hello" {
			t.Fatalf("resumed context starts with %+v", msgs.Messages)
		}
		lines := promptSettled(t, r, "say: resumed")
		got := labels(lines)
		seq[scnCompaction] = got
		if tally(lines).LastAssistantText != "resumed" {
			t.Fatalf("resumed reply %v", got)
		}
		if tail := got[len(got)-4:]; !slices.Equal(tail, []string{"agent_end", "compaction_start", "compaction_end", "SETTLED"}) || len(settles(lines)) != 1 {
			t.Fatalf("the run must settle once, after the compaction: %v", got)
		}
		_, after := pitest.SessionEntries(t, firstFile)
		added := after[len(before):]
		if len(added) == 0 || added[0]["parentId"] != before[len(before)-1]["id"] {
			t.Fatalf("new entries do not continue the old leaf %v: %v", before[len(before)-1]["id"], added)
		}
		// pi checks the threshold before the prompt (the resumed context is
		// over it already) and again after the run.
		if c := entriesOfType(added, "compaction"); len(c) != 2 || c[0]["summary"] != "faux: summary" {
			t.Fatalf("compaction entries %v", c)
		}
		if !slices.Equal(got[:2], []string{"compaction_start", "compaction_end"}) {
			t.Fatalf("no compaction before the prompt's run: %v", got)
		}
	})
	return seq
}

// BenchmarkPromptToSettled measures a text prompt's round trip through a
// worker process: prompt → response → run → get_state barrier → settle.
// The context grows with every prompt, so run it with a fixed count:
// go test -run XXX -bench PromptToSettled -benchtime=200x ./transport/pirpc/
func BenchmarkPromptToSettled(b *testing.B) {
	for _, kind := range pitest.Kinds() {
		b.Run(kind.String(), func(b *testing.B) {
			w := pitest.Start(b, kind, pitest.Options{NoSession: true})
			ctx := context.Background()
			if _, err := w.Client.GetState(ctx); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if err := w.Client.Prompt(ctx, "say: hi"); err != nil {
					b.Fatal(err)
				}
				w.UntilSettled(b)
			}
		})
	}
}
