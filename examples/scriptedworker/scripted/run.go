package scripted

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// transient matches error messages pi's auto-retry treats as temporary:
// overload, rate limits, 429/5xx, timeouts and connection failures.
var transient = regexp.MustCompile(`(?i)overloaded|rate.?limit|too many requests|\b(429|500|502|503|504)\b|service.?unavailable|server.?error|internal.?error|network.?error|connection.?(error|refused|lost|reset)|fetch failed|socket hang up|timed? ?out|timeout|terminated`)

func (w *worker) prompt(c command) {
	msg := c.Message
	if strings.HasPrefix(msg, "/faux-ui") || strings.HasPrefix(msg, "/faux-mark") {
		// Extension commands run at once, even while streaming; the
		// response comes when the command returns.
		go w.extensionCommand(c)
		return
	}
	if strings.HasPrefix(msg, "/") {
		if text, ok := w.templateText(msg); ok {
			msg = text
		}
	}
	w.mu.Lock()
	if w.active != nil {
		switch c.StreamingBehavior {
		case "steer":
			w.steering = append(w.steering, userMessage(msg))
		case "followUp":
			w.followUp = append(w.followUp, userMessage(msg))
		default:
			w.mu.Unlock()
			w.out.emit(errorResponse(c.ID, "prompt", "Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue the message."))
			return
		}
		w.out.emit(w.queueUpdate(), response(c.ID, "prompt", nil))
		w.mu.Unlock()
		return
	}
	// pi checks the threshold before a prompt too (a resumed session may
	// be over it), before answering the prompt.
	if last := lastAssistant(w.context); w.needsCompactionLocked(last) {
		w.thresholdCompactionLocked()
	}
	ctx, cancel := context.WithCancel(context.Background())
	retryCtx, cancelRetry := context.WithCancel(ctx)
	run := &activeRun{cancel: cancel, cancelRetry: cancelRetry, done: make(chan struct{})}
	w.active = run
	w.streaming = true
	// The response is written before agent_start, as pi does.
	w.out.emit(response(c.ID, "prompt", nil))
	w.mu.Unlock()
	go w.agentRun(ctx, retryCtx, run, userMessage(msg))
}

// stopActive aborts the active run (and a pending retry) and waits until
// it has ended.
func (w *worker) stopActive() {
	w.mu.Lock()
	run := w.active
	w.mu.Unlock()
	if run == nil {
		return
	}
	run.cancel()
	<-run.done
}

// agentRun is one prompt's run plus pi's auto-retries.
func (w *worker) agentRun(ctx, retryCtx context.Context, run *activeRun, prompt *message) {
	defer func() {
		w.mu.Lock()
		w.releaseLocked(run)
		w.mu.Unlock()
		run.cancel()
		close(run.done)
	}()
	prompts := []*message{prompt}
	for {
		newMessages := w.loop(ctx, prompts)
		prompts = nil

		w.mu.Lock()
		w.streaming = false
		end := obj{{"type", "agent_end"}, {"messages", newMessages}}
		last := lastAssistant(newMessages)
		if last == nil || last.StopReason != "error" || !transient.MatchString(last.ErrorMessage) || !w.autoRetry {
			if !w.needsCompactionLocked(last) {
				w.releaseLocked(run)
				w.out.emit(end)
				w.mu.Unlock()
				return
			}
			// Threshold compaction, announced in the same write as
			// agent_end; queued messages then run ~100 ms later, as in pi.
			queued := len(w.steering)+len(w.followUp) > 0
			if !queued {
				w.releaseLocked(run)
			}
			w.thresholdCompactionLocked(end)
			w.mu.Unlock()
			if queued && sleepCtx(ctx, 100*time.Millisecond) {
				continue
			}
			return
		}
		w.retryAttempt++
		attempt := w.retryAttempt
		if attempt > w.settings.maxRetries() {
			w.retryAttempt = 0
			w.releaseLocked(run)
			w.out.emit(end, obj{{"type", "auto_retry_end"}, {"success", false}, {"attempt", attempt - 1}, {"finalError", last.ErrorMessage}})
			w.mu.Unlock()
			return
		}
		delay := w.settings.baseDelay() * time.Duration(math.Pow(2, float64(attempt-1)))
		// The failed attempt leaves the context (it stays in the file).
		if n := len(w.context); n > 0 && w.context[n-1] == last {
			w.dropLastContextLocked()
		}
		// agent_end and auto_retry_start in one write: a client's get_state
		// barrier cannot come between them.
		w.out.emit(end, obj{{"type", "auto_retry_start"}, {"attempt", attempt}, {"maxAttempts", w.settings.maxRetries()},
			{"delayMs", delay.Milliseconds()}, {"errorMessage", last.ErrorMessage}})
		w.mu.Unlock()

		select {
		case <-time.After(delay):
		case <-retryCtx.Done():
			w.mu.Lock()
			w.retryAttempt = 0
			w.releaseLocked(run)
			w.out.emit(obj{{"type", "auto_retry_end"}, {"success", false}, {"attempt", attempt}, {"finalError", "Retry cancelled"}})
			w.mu.Unlock()
			return
		}
	}
}

// releaseLocked ends the run's hold on the worker before its last record
// is written: a client that sees the worker idle may prompt at once (pi
// checks only isStreaming).
// A later run that already started is left alone.
func (w *worker) releaseLocked(run *activeRun) {
	if w.active == run {
		w.active = nil
		w.streaming = false
	}
}

func lastAssistant(msgs []*message) *message {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "assistant" {
			return msgs[i]
		}
	}
	return nil
}

// loop is pi's agent loop: turns of model replies and tool calls, queued
// steers after each turn, follow-ups when it would stop. It returns the
// messages the run created; the caller writes agent_end.
func (w *worker) loop(ctx context.Context, prompts []*message) []*message {
	var created []*message
	w.mu.Lock()
	w.streaming = true
	w.out.emit(obj{{"type", "agent_start"}}, obj{{"type", "turn_start"}})
	for _, p := range prompts {
		w.deliverLocked(p, false)
		created = append(created, p)
	}
	pending := w.takeLocked(&w.steering, w.steeringMode)
	w.mu.Unlock()

	first := true
	for {
		moreTools := true
		for moreTools || len(pending) > 0 {
			w.mu.Lock()
			if !first {
				w.out.emit(obj{{"type", "turn_start"}})
			}
			first = false
			for _, m := range pending {
				w.deliverLocked(m, true)
				created = append(created, m)
			}
			pending = nil
			w.mu.Unlock()

			reply := w.stream(ctx)
			created = append(created, reply)
			if reply.StopReason == "error" || reply.StopReason == "aborted" {
				w.out.emit(obj{{"type", "turn_end"}, {"message", reply}, {"toolResults", []*message{}}})
				return created
			}
			calls := reply.toolCalls()
			results := w.execTools(ctx, calls)
			created = append(created, results...)
			moreTools = len(calls) > 0
			w.mu.Lock()
			w.out.emit(obj{{"type", "turn_end"}, {"message", reply}, {"toolResults", nonNil(results)}})
			pending = w.takeLocked(&w.steering, w.steeringMode)
			w.mu.Unlock()
		}
		w.mu.Lock()
		pending = w.takeLocked(&w.followUp, w.followUpMode)
		w.mu.Unlock()
		if len(pending) == 0 {
			return created
		}
	}
}

func nonNil(ms []*message) []*message {
	if ms == nil {
		return []*message{}
	}
	return ms
}

// takeLocked dequeues one message, or all in mode "all".
func (w *worker) takeLocked(queue *[]*message, mode string) []*message {
	if len(*queue) == 0 {
		return nil
	}
	n := 1
	if mode == "all" {
		n = len(*queue)
	}
	taken := append([]*message(nil), (*queue)[:n]...)
	*queue = (*queue)[n:]
	return taken
}

// deliverLocked writes a user message into the run; a queued one is
// announced by a queue_update first, as pi does.
func (w *worker) deliverLocked(m *message, queued bool) {
	if queued {
		w.out.emit(w.queueUpdate())
	}
	w.out.emit(obj{{"type", "message_start"}, {"message", m}}, obj{{"type", "message_end"}, {"message", m}})
	w.appendContextLocked(m)
	w.appendEntry(&entry{Type: "message", Message: m})
}

// sleepCtx waits d or until ctx ends; it reports whether ctx is still live.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// stream produces one assistant message with message_start, the
// message_update steps and message_end.
func (w *worker) stream(ctx context.Context) *message {
	w.mu.Lock()
	// The model answers the end of the context; the rest counts only
	// through the running totals (copying or walking a long session's
	// whole context at every reply made each prompt slower than the last).
	tail := append([]*message{}, replyTail(w.context)...)
	assistants, contextChars := w.contextAssistants, w.contextChars
	msg := &message{Role: "assistant", API: "pifleet-faux", Provider: w.provider, Model: w.modelID,
		Usage: &usage{}, StopReason: "stop", Timestamp: nowMillis()}
	w.mu.Unlock()

	p := w.model.reply(tail)
	chunk := max(1, int(envNumber("PIFLEET_FAUX_CHUNK", 16)))
	delay := time.Duration(p.delayMs) * time.Millisecond

	w.out.emit(obj{{"type", "message_start"}, {"message", msg.clone()}})
	// The partial message is encoded once per update and written twice,
	// as pi writes it (assistantMessageEvent.partial and message).
	var partial []byte
	update := func(kind string, index int, extra ...field) {
		partial, _ = appendJSON(partial[:0], msg)
		ev := append(obj{{"type", kind}, {"contentIndex", index}}, extra...)
		ev = append(ev, field{"partial", encodedJSON(partial)})
		w.out.emit(obj{{"type", "message_update"}, {"assistantMessageEvent", ev}, {"message", encodedJSON(partial)}})
	}

	aborted, outChars, toolN := false, 0, 0
blocks:
	for _, b := range p.blocks {
		index := len(msg.Content)
		switch b.kind {
		case blockTool:
			toolN++
			id := fmt.Sprintf("faux_%d_%d", assistants, toolN)
			msg.Content = append(msg.Content, part{Type: "toolCall", ID: id, Name: b.tool, Arguments: json.RawMessage("{}")})
			update("toolcall_start", index)
			for _, piece := range chunks(string(b.args), chunk) {
				if !sleepCtx(ctx, delay) {
					aborted = true
					break blocks
				}
				update("toolcall_delta", index, field{"delta", piece})
			}
			msg.Content[index].Arguments = b.args
			outChars += len([]rune(string(b.args)))
			update("toolcall_end", index, field{"toolCall", msg.Content[index]})
		default:
			kind := "text"
			if b.kind == blockThinking {
				kind = "thinking"
			}
			// The text so far, and the same as a JSON string, each grown a
			// chunk at a time: rebuilding and escaping the whole text at
			// every chunk made the worker's output cost the square of the
			// answer twice over. Escaping the chunks one by one writes the
			// same bytes, since each chunk is whole runes.
			var acc strings.Builder
			encoded := []byte(`""`)
			setPart := func() {
				text := acc.String()
				if kind == "text" {
					msg.Content[index] = textPart(text)
				} else {
					msg.Content[index] = thinkingPart(text)
				}
				msg.Content[index].encoded = encoded
			}
			msg.Content = append(msg.Content, part{})
			setPart()
			update(kind+"_start", index)
			for _, piece := range chunks(b.text, chunk) {
				if !sleepCtx(ctx, delay) {
					aborted = true
					break blocks
				}
				acc.WriteString(piece)
				encoded = append(appendStringBody(encoded[:len(encoded)-1], piece), '"')
				setPart()
				update(kind+"_delta", index, field{"delta", piece})
			}
			outChars += len([]rune(b.text))
			update(kind+"_end", index, field{"content", b.text})
		}
	}
	if len(p.blocks) == 0 && !sleepCtx(ctx, delay) {
		aborted = true
	}
	for i := range msg.Content {
		msg.Content[i].encoded = nil // the message is kept: its texts alone say what it holds
	}

	input, output := tokens(contextChars), tokens(outChars)
	switch {
	case aborted:
		msg.StopReason, msg.ErrorMessage = "aborted", "Request was aborted"
	case p.failed:
		msg.Usage.Input, msg.Usage.Output, msg.Usage.TotalTokens = input, output, input+output
		msg.StopReason, msg.ErrorMessage = "error", p.errMsg
	default:
		msg.Usage.Input, msg.Usage.Output, msg.Usage.TotalTokens = input, output, input+output
		cost := envNumber("PIFLEET_FAUX_COST", 0)
		msg.Usage.Cost.Output, msg.Usage.Cost.Total = cost, cost
		msg.StopReason = "stop"
		if toolN > 0 {
			msg.StopReason = "toolUse"
		}
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	records := []any{obj{{"type", "message_end"}, {"message", msg}}}
	if msg.StopReason != "error" && msg.StopReason != "aborted" && w.retryAttempt > 0 {
		records = append(records, obj{{"type", "auto_retry_end"}, {"success", true}, {"attempt", w.retryAttempt}})
		w.retryAttempt = 0
	}
	w.out.emit(records...)
	w.appendContextLocked(msg)
	w.appendEntry(&entry{Type: "message", Message: msg})
	return msg
}

// execTools runs one message's tool calls in parallel, like pi: every
// tool_execution_start first, ends as they finish, then the tool results
// in call order.
func (w *worker) execTools(ctx context.Context, calls []part) []*message {
	if len(calls) == 0 {
		return nil
	}
	results := make([]*message, len(calls))
	end := func(i int, r toolResult) {
		c := calls[i]
		w.out.emit(obj{{"type", "tool_execution_end"}, {"toolCallId", c.ID}, {"toolName", c.Name},
			{"result", obj{{"content", []part{textPart(r.text)}}, {"details", r.details}}}, {"isError", r.isError}})
		results[i] = toolResultMessage(c.ID, c.Name, r.text, r.details, r.isError)
	}
	var runnable []int
	for i, c := range calls {
		w.out.emit(obj{{"type", "tool_execution_start"}, {"toolCallId", c.ID}, {"toolName", c.Name}, {"args", c.Arguments}})
		if !w.tools.known(c.Name) {
			end(i, toolError(fmt.Sprintf("Tool %s not found", c.Name)))
			continue
		}
		runnable = append(runnable, i)
	}
	// Executions start once every start is out, as in pi: written, not
	// only emitted, so that whoever sees a tool running (or its files)
	// has seen the run's events before it.
	w.out.flush()
	var wg sync.WaitGroup
	for _, i := range runnable {
		c := calls[i]
		wg.Go(func() {
			r := w.tools.run(ctx, c.Name, c.Arguments, func(partial any) {
				w.out.emit(obj{{"type", "tool_execution_update"}, {"toolCallId", c.ID}, {"toolName", c.Name},
					{"args", c.Arguments}, {"partialResult", partial}})
			})
			end(i, r)
		})
	}
	wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, m := range results {
		w.out.emit(obj{{"type", "message_start"}, {"message", m}}, obj{{"type", "message_end"}, {"message", m}})
		w.appendContextLocked(m)
		w.appendEntry(&entry{Type: "message", Message: m})
	}
	return results
}

// extensionCommand runs /faux-ui and /faux-mark, the commands the faux
// extension registers in the real pi.
func (w *worker) extensionCommand(c command) {
	name, args, _ := strings.Cut(strings.TrimPrefix(c.Message, "/"), " ")
	switch name {
	case "faux-ui":
		timeout, _ := strconv.Atoi(strings.TrimSpace(args))
		confirmed := w.confirm("faux-ui", "Proceed?", time.Duration(timeout)*time.Millisecond)
		verdict := "declined"
		if confirmed {
			verdict = "confirmed"
		}
		w.out.emit(obj{{"type", "extension_ui_request"}, {"id", newRequestID()}, {"method", "notify"},
			{"message", "faux-ui: " + verdict}, {"notifyType", "info"}})
		w.mu.Lock()
		w.appendEntry(&entry{Type: "custom", CustomType: "faux-ui", Data: obj{{"confirmed", confirmed}}})
		w.mu.Unlock()
	case "faux-mark":
		w.mu.Lock()
		w.appendEntry(&entry{Type: "custom", CustomType: "faux-mark", Data: obj{{"text", args}}})
		w.mu.Unlock()
	}
	w.out.emit(response(c.ID, "prompt", nil))
}

// confirm opens a confirm dialog and waits for its answer (false on
// timeout or cancel).
func (w *worker) confirm(title, message string, timeout time.Duration) bool {
	id := newRequestID()
	answer := make(chan obj, 1)
	w.mu.Lock()
	w.dialogs[id] = answer
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		delete(w.dialogs, id)
		w.mu.Unlock()
	}()
	var t any
	if timeout > 0 {
		t = timeout.Milliseconds()
	}
	w.out.emit(obj{{"type", "extension_ui_request"}, {"id", id}, {"method", "confirm"}, {"title", title}, {"message", message}, {"timeout", t}})
	var expired <-chan time.Time
	if timeout > 0 {
		expired = time.After(timeout)
	}
	select {
	case a := <-answer:
		for _, f := range a {
			if f.key == "confirmed" {
				return f.value == true
			}
		}
		return false
	case <-expired:
		return false
	}
}

// answerDialog delivers an extension_ui_response; unknown ids are ignored.
func (w *worker) answerDialog(c command) {
	w.mu.Lock()
	ch := w.dialogs[c.ID]
	w.mu.Unlock()
	if ch == nil {
		return
	}
	confirmed := c.Confirmed != nil && *c.Confirmed && !c.Cancelled
	select {
	case ch <- obj{{"confirmed", confirmed}}:
	default:
	}
}

// compact is the compact command: pi's manual compaction.
func (w *worker) compact(c command) {
	w.stopActive() // pi aborts a running run first
	w.mu.Lock()
	defer w.mu.Unlock()
	path := w.sess.branch(w.sess.leaf)
	switch {
	case len(w.context) == 0:
		w.out.emit(errorResponse(c.ID, "compact", "Nothing to compact (session too small)"))
		return
	case path[len(path)-1].Type == "compaction":
		w.out.emit(errorResponse(c.ID, "compact", "Already compacted"))
		return
	}
	w.out.emit(obj{{"type", "compaction_start"}, {"reason", "manual"}})
	result := w.compactLocked()
	w.out.emit(obj{{"type", "compaction_end"}, {"reason", "manual"}, {"result", result}, {"aborted", false}, {"willRetry", false}},
		response(c.ID, "compact", result))
}

// compactLocked appends a compaction entry keeping the whole branch (the
// faux summary replaces nothing) and rebuilds the context from it.
func (w *worker) compactLocked() obj {
	path := w.sess.branch(w.sess.leaf)
	chars := w.contextChars
	details := obj{{"readFiles", []string{}}, {"modifiedFiles", []string{}}}
	e := w.appendEntry(&entry{Type: "compaction", Summary: "faux: summary", FirstKeptID: path[0].ID,
		TokensBefore: tokens(chars), Details: details})
	w.setContextLocked(w.sess.context())
	return obj{{"summary", e.Summary}, {"firstKeptEntryId", e.FirstKeptID}, {"tokensBefore", e.TokensBefore}, {"details", details}}
}

// needsCompactionLocked is pi's threshold rule, checked after a run and
// before a prompt: the last reply's context tokens exceed the window minus
// the reserve, and no compaction came after that reply.
func (w *worker) needsCompactionLocked(last *message) bool {
	if !w.autoCompaction || last == nil || last.Usage == nil || last.StopReason == "aborted" || last.StopReason == "error" {
		return false
	}
	// pi compares timestamps; entry order says the same without ties: a
	// compaction after last's entry on the active branch settles it. The
	// walk goes from the leaf back, so it stops at once in the usual case
	// (last is the newest message) instead of reading the whole branch at
	// every prompt.
	if w.sess.compactedSince(last) {
		return false
	}
	window := envNumber("PIFLEET_FAUX_CONTEXT_WINDOW", 128000)
	return float64(last.Usage.TotalTokens) > window-float64(w.settings.reserveTokens())
}

// thresholdCompactionLocked runs pi's automatic compaction.
func (w *worker) thresholdCompactionLocked(before ...any) {
	w.out.emit(append(before, obj{{"type", "compaction_start"}, {"reason", "threshold"}})...)
	result := w.compactLocked()
	w.out.emit(obj{{"type", "compaction_end"}, {"reason", "threshold"}, {"result", result}, {"aborted", false}, {"willRetry", false}})
}

// bashCommand is the bash RPC command: run now, answer with the output,
// keep a bashExecution message for the next prompt.
func (w *worker) bashCommand(c command) {
	ctx, cancel := context.WithCancel(context.Background())
	w.mu.Lock()
	w.bashCancel = cancel
	w.mu.Unlock()
	defer cancel()

	w.out.flush() // what came before is out before the command runs
	cmd := exec.Command("sh", "-c", c.Command)
	cmd.Dir = w.cwd
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	exitCode, cancelled := 0, false
	if err := cmd.Start(); err != nil {
		w.out.emit(errorResponse(c.ID, "bash", err.Error()))
		return
	}
	stop := context.AfterFunc(ctx, func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	err := cmd.Wait()
	stop()
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil:
		cancelled = true
	case errors.As(err, &exitErr):
		exitCode = exitErr.ExitCode()
	case err != nil:
		w.out.emit(errorResponse(c.ID, "bash", err.Error()))
		return
	}
	m := &message{Role: "bashExecution", Command: c.Command, Output: out.String(), ExitCode: exitCode,
		Cancelled: cancelled, Timestamp: nowMillis()}
	w.mu.Lock()
	w.appendContextLocked(m)
	w.appendEntry(&entry{Type: "message", Message: m})
	w.bashCancel = nil
	w.mu.Unlock()
	w.out.emit(response(c.ID, "bash", obj{{"output", m.Output}, {"exitCode", exitCode}, {"cancelled", cancelled}, {"truncated", false}}))
}

// replaceSession handles new_session, switch_session, fork and clone.
func (w *worker) replaceSession(c command) {
	w.stopActive()
	w.mu.Lock()
	defer w.mu.Unlock()
	fail := func(msg string) { w.out.emit(errorResponse(c.ID, c.Type, msg)) }
	dir := w.sess.dir
	var next *session
	var err error
	var text any
	switch c.Type {
	case "new_session":
		next = newSession(dir, w.cwd, c.ParentSession)
	case "switch_session":
		if _, statErr := os.Stat(c.SessionPath); statErr != nil {
			fail(fmt.Sprintf("Session file not found: %s", c.SessionPath))
			return
		}
		next, err = openSession(c.SessionPath, w.cwd)
	case "clone":
		if w.sess.leaf == "" {
			fail("Cannot clone session: no current entry selected")
			return
		}
		next, err = w.sess.fork(w.sess.leaf)
	case "fork":
		e := w.sess.byID[c.EntryID]
		if e == nil || e.Type != "message" || e.Message == nil || e.Message.Role != "user" {
			fail("Invalid entry ID for forking")
			return
		}
		text = e.Message.text()
		if e.ParentID == "" {
			next = newSession(dir, w.cwd, w.sess.path)
		} else {
			next, err = w.sess.fork(e.ParentID)
		}
	}
	if err != nil {
		fail(err.Error())
		return
	}
	w.sess = next
	w.steering, w.followUp = nil, nil
	if len(next.entries) == 0 {
		w.setContextLocked(nil)
		w.startEntries()
	} else {
		w.restoreFromSession(w.cfg)
	}
	data := obj{{"cancelled", false}}
	if c.Type == "fork" {
		data = obj{{"text", text}, {"cancelled", false}}
	}
	w.out.emit(response(c.ID, c.Type, data))
}
