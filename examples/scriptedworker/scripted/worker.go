package scripted

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

var thinkingLevels = []string{"off", "minimal", "low", "medium", "high", "xhigh"}

func validThinking(level string) bool {
	for _, l := range thinkingLevels {
		if l == level {
			return true
		}
	}
	return false
}

// worker is the state of one scripted pi. Commands arrive on one goroutine;
// a run (and its retries) goes on in another; mu guards what both touch.
type worker struct {
	cfg      config
	out      *emitter
	cwd      string
	tools    *toolRunner
	model    *fauxModel
	settings settings

	mu             sync.Mutex
	provider       string
	modelID        string
	thinking       string
	steeringMode   string
	followUpMode   string
	autoCompaction bool
	autoRetry      bool
	sess           *session
	context        []*message // what the model sees: changed only by the *ContextLocked methods
	// Running totals over context, for the model's token estimate.
	contextChars      int // llmText characters
	contextAssistants int // assistant messages
	steering          []*message
	followUp          []*message
	streaming         bool // between agent_start and agent_end
	active            *activeRun
	retryAttempt      int
	dialogs           map[string]chan obj
	bashCancel        context.CancelFunc
}

// activeRun is a prompt's run including its auto-retries.
type activeRun struct {
	cancel      context.CancelFunc
	cancelRetry context.CancelFunc
	done        chan struct{}
}

// settings mirror the parts of pi's settings.json the worker honours.
type settings struct {
	Retry struct {
		Enabled     *bool `json:"enabled"`
		MaxRetries  *int  `json:"maxRetries"`
		BaseDelayMs *int  `json:"baseDelayMs"`
	} `json:"retry"`
	Compaction struct {
		Enabled       *bool `json:"enabled"`
		ReserveTokens *int  `json:"reserveTokens"`
	} `json:"compaction"`
}

// loadSettings reads $PI_CODING_AGENT_DIR/settings.json (pi's defaults
// apply to whatever is missing).
func loadSettings() settings {
	var s settings
	if b, err := os.ReadFile(filepath.Join(agentDir(), "settings.json")); err == nil {
		_ = json.Unmarshal(b, &s)
	}
	return s
}

func (s settings) maxRetries() int {
	if s.Retry.MaxRetries != nil {
		return *s.Retry.MaxRetries
	}
	return 3
}

func (s settings) baseDelay() time.Duration {
	if s.Retry.BaseDelayMs != nil {
		return time.Duration(*s.Retry.BaseDelayMs) * time.Millisecond
	}
	return 2 * time.Second
}

func (s settings) reserveTokens() int {
	if s.Compaction.ReserveTokens != nil {
		return *s.Compaction.ReserveTokens
	}
	return 16384
}

func newWorker(cfg config, out *emitter) (*worker, error) {
	cwd, err := os.Getwd()
	if err != nil {
		return nil, err
	}
	w := &worker{
		cfg: cfg, out: out, cwd: cwd, tools: newToolRunner(cwd, cfg),
		model: &fauxModel{failures: map[string]int{}}, settings: loadSettings(),
		provider: cfg.provider, modelID: cfg.model, thinking: "medium",
		steeringMode: "one-at-a-time", followUpMode: "one-at-a-time",
		dialogs: map[string]chan obj{},
	}
	w.autoRetry = w.settings.Retry.Enabled == nil || *w.settings.Retry.Enabled
	w.autoCompaction = w.settings.Compaction.Enabled == nil || *w.settings.Compaction.Enabled
	if cfg.thinking != "" {
		w.thinking = cfg.thinking
	}
	fresh := true
	switch {
	case cfg.noSession:
		w.sess = newSession("", cwd, "")
	case cfg.session != "":
		path := cfg.session
		if !strings.ContainsAny(path, `/\`) && !strings.HasSuffix(path, ".jsonl") {
			dir := cfg.sessionDir
			if dir == "" {
				dir = defaultSessionDir(cwd)
			}
			if path, err = findSession(dir, path); err != nil {
				return nil, err
			}
		}
		if w.sess, err = openSession(path, cwd); err != nil {
			return nil, err
		}
		fresh = len(w.sess.entries) == 0
	default:
		dir := cfg.sessionDir
		if dir == "" {
			dir = defaultSessionDir(cwd)
		}
		w.sess = newSession(dir, cwd, "")
	}
	if fresh {
		w.startEntries()
	} else {
		w.restoreFromSession(cfg)
	}
	return w, nil
}

// startEntries writes what a fresh pi session starts with.
func (w *worker) startEntries() {
	w.appendEntry(&entry{Type: "model_change", Provider: w.provider, ModelID: w.modelID})
	w.appendEntry(&entry{Type: "thinking_level_change", ThinkingLevel: w.thinking})
}

// restoreFromSession takes the context, model and thinking level from an
// opened session; flags given on the command line win.
func (w *worker) restoreFromSession(cfg config) {
	w.setContextLocked(w.sess.context())
	if e := w.sess.latest("model_change"); e != nil && cfg.model == "faux-1" && cfg.provider == "faux" {
		w.provider, w.modelID = e.Provider, e.ModelID
	}
	if e := w.sess.latest("thinking_level_change"); e != nil && cfg.thinking == "" {
		w.thinking = e.ThinkingLevel
	} else if e == nil {
		w.appendEntry(&entry{Type: "thinking_level_change", ThinkingLevel: w.thinking})
	}
}

// appendEntry persists an entry; mu must be held or the worker not shared
// yet. A write error is reported on stderr, as pi does not fail a command
// on it either.
func (w *worker) appendEntry(e *entry) *entry {
	e, err := w.sess.append(e)
	if err != nil {
		fmt.Fprintf(os.Stderr, "scriptedworker: writing session: %v\n", err)
	}
	return e
}

func (w *worker) sessionFile() any {
	if w.sess.path == "" {
		return nil
	}
	return w.sess.path
}

func (w *worker) modelObject() obj {
	return obj{{"id", w.modelID}, {"name", "Faux 1"}, {"api", "pifleet-faux"}, {"provider", w.provider},
		{"baseUrl", "http://127.0.0.1:9/faux"}, {"reasoning", true}, {"input", []string{"text"}},
		{"cost", obj{{"input", 0}, {"output", 0}, {"cacheRead", 0}, {"cacheWrite", 0}}},
		{"contextWindow", int(envNumber("PIFLEET_FAUX_CONTEXT_WINDOW", 128000))}, {"maxTokens", 16384}}
}

// queueUpdate is the queue_update event for the current queues.
func (w *worker) queueUpdate() obj {
	texts := func(ms []*message) []string {
		out := []string{}
		for _, m := range ms {
			out = append(out, m.text())
		}
		return out
	}
	return obj{{"type", "queue_update"}, {"steering", texts(w.steering)}, {"followUp", texts(w.followUp)}}
}

// command is the envelope of every command.
type command struct {
	ID                string `json:"id"`
	Type              string `json:"type"`
	Message           string `json:"message"`
	StreamingBehavior string `json:"streamingBehavior"`
	Provider          string `json:"provider"`
	ModelID           string `json:"modelId"`
	Level             string `json:"level"`
	Mode              string `json:"mode"`
	Enabled           bool   `json:"enabled"`
	Command           string `json:"command"`
	Name              string `json:"name"`
	SessionPath       string `json:"sessionPath"`
	ParentSession     string `json:"parentSession"`
	EntryID           string `json:"entryId"`
	OutputPath        string `json:"outputPath"`
	Confirmed         *bool  `json:"confirmed"`
	Cancelled         bool   `json:"cancelled"`
}

func (w *worker) handleLine(line string) {
	var c command
	if err := json.Unmarshal([]byte(line), &c); err != nil {
		w.out.emit(errorResponse("", "parse", "Failed to parse command: "+err.Error()))
		return
	}
	if c.Type == "extension_ui_response" {
		w.answerDialog(c)
		return
	}
	w.dispatch(c)
}

func (w *worker) dispatch(c command) {
	ok := func(data any) { w.out.emit(response(c.ID, c.Type, data)) }
	fail := func(msg string) { w.out.emit(errorResponse(c.ID, c.Type, msg)) }
	switch c.Type {
	case "prompt":
		w.prompt(c)
	case "steer", "follow_up":
		w.mu.Lock()
		m := userMessage(c.Message)
		if c.Type == "steer" {
			w.steering = append(w.steering, m)
		} else {
			w.followUp = append(w.followUp, m)
		}
		w.out.emit(w.queueUpdate())
		w.mu.Unlock()
		ok(nil)
	case "abort":
		go func() {
			w.stopActive()
			ok(nil)
		}()
	case "abort_retry":
		w.mu.Lock()
		if w.active != nil {
			w.active.cancelRetry()
		}
		w.mu.Unlock()
		ok(nil)
	case "get_state":
		ok(w.state())
	case "get_messages":
		w.mu.Lock()
		msgs := append([]*message{}, w.context...)
		w.mu.Unlock()
		ok(obj{{"messages", msgs}})
	case "set_model":
		w.mu.Lock()
		defer w.mu.Unlock()
		if c.Provider != w.provider || c.ModelID != w.modelID {
			fail(fmt.Sprintf("Model not found: %s/%s", c.Provider, c.ModelID))
			return
		}
		w.appendEntry(&entry{Type: "model_change", Provider: c.Provider, ModelID: c.ModelID})
		ok(w.modelObject())
	case "cycle_model":
		ok(jsonNull) // one model only
	case "get_available_models":
		w.mu.Lock()
		defer w.mu.Unlock()
		ok(obj{{"models", []obj{w.modelObject()}}})
	case "set_thinking_level":
		if !validThinking(c.Level) {
			fail(fmt.Sprintf("Invalid thinking level: %s", c.Level))
			return
		}
		w.setThinking(c.Level)
		ok(nil)
	case "cycle_thinking_level":
		w.mu.Lock()
		next := thinkingLevels[0]
		for i, l := range thinkingLevels {
			if l == w.thinking {
				next = thinkingLevels[(i+1)%len(thinkingLevels)]
			}
		}
		w.mu.Unlock()
		w.setThinking(next)
		ok(obj{{"level", next}})
	case "set_steering_mode", "set_follow_up_mode":
		if c.Mode != "all" && c.Mode != "one-at-a-time" {
			fail(fmt.Sprintf("Invalid mode: %s", c.Mode))
			return
		}
		w.mu.Lock()
		if c.Type == "set_steering_mode" {
			w.steeringMode = c.Mode
		} else {
			w.followUpMode = c.Mode
		}
		w.mu.Unlock()
		ok(nil)
	case "set_auto_compaction", "set_auto_retry":
		w.mu.Lock()
		if c.Type == "set_auto_compaction" {
			w.autoCompaction = c.Enabled
		} else {
			w.autoRetry = c.Enabled
		}
		w.mu.Unlock()
		ok(nil)
	case "compact":
		go w.compact(c)
	case "bash":
		go w.bashCommand(c)
	case "abort_bash":
		w.mu.Lock()
		if w.bashCancel != nil {
			w.bashCancel()
		}
		w.mu.Unlock()
		ok(nil)
	case "get_session_stats":
		ok(w.stats())
	case "export_html":
		path, err := w.exportHTML(c.OutputPath)
		if err != nil {
			fail(err.Error())
			return
		}
		ok(obj{{"path", path}})
	case "new_session", "switch_session", "fork", "clone":
		go w.replaceSession(c)
	case "get_fork_messages":
		w.mu.Lock()
		msgs := []obj{}
		for _, e := range w.sess.branch(w.sess.leaf) {
			if e.Type == "message" && e.Message != nil && e.Message.Role == "user" {
				msgs = append(msgs, obj{{"entryId", e.ID}, {"text", e.Message.text()}})
			}
		}
		w.mu.Unlock()
		ok(obj{{"messages", msgs}})
	case "get_last_assistant_text":
		ok(obj{{"text", w.lastAssistantText()}})
	case "set_session_name":
		name := strings.TrimSpace(c.Name)
		if name == "" {
			fail("Session name cannot be empty")
			return
		}
		w.mu.Lock()
		w.appendEntry(&entry{Type: "session_info", Name: name})
		w.out.emit(obj{{"type", "session_info_changed"}, {"name", name}})
		w.mu.Unlock()
		ok(nil)
	case "get_commands":
		ok(obj{{"commands", w.commands()}})
	default:
		// pi answers an unknown command without its id.
		w.out.emit(errorResponse("", c.Type, "Unknown command: "+c.Type))
	}
}

func (w *worker) setThinking(level string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if level == w.thinking {
		return
	}
	w.thinking = level
	w.appendEntry(&entry{Type: "thinking_level_change", ThinkingLevel: level})
	w.out.emit(obj{{"type", "thinking_level_changed"}, {"level", level}})
}

func (w *worker) state() obj {
	w.mu.Lock()
	defer w.mu.Unlock()
	var name any
	if n := w.sess.name(); n != "" {
		name = n
	}
	return obj{{"model", w.modelObject()}, {"thinkingLevel", w.thinking}, {"isStreaming", w.streaming},
		{"isCompacting", false}, {"steeringMode", w.steeringMode}, {"followUpMode", w.followUpMode},
		{"sessionFile", w.sessionFile()}, {"sessionId", w.sess.header.ID}, {"sessionName", name},
		{"autoCompactionEnabled", w.autoCompaction}, {"messageCount", len(w.context)},
		{"pendingMessageCount", len(w.steering) + len(w.followUp)}}
}

func (w *worker) lastAssistantText() any {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := len(w.context) - 1; i >= 0; i-- {
		m := w.context[i]
		if m.Role != "assistant" || (m.StopReason == "aborted" && len(m.Content) == 0) {
			continue
		}
		var b strings.Builder
		for _, p := range m.Content {
			if p.Type == "text" && p.Text != nil {
				b.WriteString(*p.Text)
			}
		}
		if t := strings.TrimSpace(b.String()); t != "" {
			return t
		}
		return nil
	}
	return nil // pi's undefined: {"text"} is left out
}

func (w *worker) stats() obj {
	w.mu.Lock()
	defer w.mu.Unlock()
	var users, assistants, calls, results int
	var in, out, cr, cw, total int
	var cost float64
	var lastTokens int
	for _, m := range w.context {
		switch m.Role {
		case "user":
			users++
		case "assistant":
			assistants++
			calls += len(m.toolCalls())
			if u := m.Usage; u != nil {
				in, out, cr, cw = in+u.Input, out+u.Output, cr+u.CacheRead, cw+u.CacheWrite
				total += u.TotalTokens
				cost += u.Cost.Total
				if m.StopReason != "error" && m.StopReason != "aborted" {
					lastTokens = u.TotalTokens
				}
			}
		case "toolResult":
			results++
		}
	}
	window := envNumber("PIFLEET_FAUX_CONTEXT_WINDOW", 128000)
	return obj{{"sessionFile", w.sessionFile()}, {"sessionId", w.sess.header.ID}, {"userMessages", users},
		{"assistantMessages", assistants}, {"toolCalls", calls}, {"toolResults", results},
		{"totalMessages", len(w.context)},
		{"tokens", obj{{"input", in}, {"output", out}, {"cacheRead", cr}, {"cacheWrite", cw}, {"total", total}}},
		{"cost", cost},
		{"contextUsage", obj{{"tokens", lastTokens}, {"contextWindow", int(window)}, {"percent", float64(lastTokens) / window * 100}}}}
}

// commands lists what get_commands reports: the faux extension commands,
// then prompt templates, then skills, like pi.
func (w *worker) commands() []obj {
	self, _ := os.Executable()
	info := obj{{"path", self}, {"source", "cli"}, {"scope", "temporary"}, {"origin", "top-level"}}
	cmds := []obj{
		{{"name", "faux-ui"}, {"description", "Open a confirm dialog and record the answer (pifleet tests)"}, {"source", "extension"}, {"sourceInfo", info}},
		{{"name", "faux-mark"}, {"description", "Append a custom faux-mark entry (pifleet tests)"}, {"source", "extension"}, {"sourceInfo", info}},
	}
	for _, p := range w.cfg.promptTemplates {
		name := strings.TrimSuffix(filepath.Base(p), ".md")
		cmds = append(cmds, obj{{"name", name}, {"source", "prompt"},
			{"sourceInfo", obj{{"path", p}, {"source", "cli"}, {"scope", "temporary"}, {"origin", "top-level"}}}})
	}
	for _, s := range w.cfg.skills {
		name, desc := skillInfo(s)
		cmds = append(cmds, obj{{"name", "skill:" + name}, {"description", nilIfEmpty(desc)}, {"source", "skill"},
			{"sourceInfo", obj{{"path", s}, {"source", "cli"}, {"scope", "temporary"}, {"origin", "top-level"}}}})
	}
	return cmds
}

// skillInfo reads a skill's name and description from its SKILL.md
// frontmatter (a directory holding SKILL.md, or a markdown file).
func skillInfo(path string) (name, description string) {
	file := path
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		file = filepath.Join(path, "SKILL.md")
		name = filepath.Base(path)
	} else {
		name = strings.TrimSuffix(filepath.Base(path), ".md")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return name, ""
	}
	text := string(b)
	if !strings.HasPrefix(text, "---") {
		return name, ""
	}
	front, _, _ := strings.Cut(strings.TrimPrefix(text, "---"), "\n---")
	for _, line := range strings.Split(front, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		v = strings.Trim(strings.TrimSpace(v), `"'`)
		switch strings.TrimSpace(k) {
		case "name":
			name = v
		case "description":
			description = v
		}
	}
	return name, description
}

// templateText expands "/name args" for a --prompt-template or
// "/skill:name args" for a --skill; ok is false for anything else.
func (w *worker) templateText(msg string) (string, bool) {
	head, args, _ := strings.Cut(strings.TrimPrefix(msg, "/"), " ")
	for _, p := range w.cfg.promptTemplates {
		if strings.TrimSuffix(filepath.Base(p), ".md") == head {
			b, err := os.ReadFile(p)
			if err != nil {
				return "", false
			}
			body := string(b)
			if strings.HasPrefix(body, "---") {
				if _, rest, ok := strings.Cut(strings.TrimPrefix(body, "---"), "\n---"); ok {
					body = strings.TrimLeft(rest, "\n")
				}
			}
			return strings.NewReplacer("$ARGUMENTS", args, "$@", args).Replace(body), true
		}
	}
	for _, s := range w.cfg.skills {
		if name, _ := skillInfo(s); "skill:"+name == head {
			return fmt.Sprintf("Use the skill %s (%s).\n\n%s", name, s, args), true
		}
	}
	return "", false
}

func (w *worker) exportHTML(outputPath string) (string, error) {
	w.mu.Lock()
	msgs := append([]*message{}, w.context...)
	id := w.sess.header.ID
	w.mu.Unlock()
	if len(msgs) == 0 {
		return "", fmt.Errorf("nothing to export: the session has no messages")
	}
	if outputPath == "" {
		outputPath = filepath.Join(w.cwd, "pi-session-"+id+".html")
	}
	var b strings.Builder
	b.WriteString("<!doctype html><meta charset=utf-8><title>pi session</title>\n")
	for _, m := range msgs {
		fmt.Fprintf(&b, "<section class=%q><pre>%s</pre></section>\n", m.Role, htmlEscape(m.llmText()))
	}
	return outputPath, os.WriteFile(outputPath, []byte(b.String()), 0o644)
}

func htmlEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;").Replace(s)
}

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// appendContextLocked adds m to the context the model sees.
func (w *worker) appendContextLocked(m *message) {
	w.context = append(w.context, m)
	w.count(m, 1)
}

// dropLastContextLocked takes the newest message out of the context (a
// failed attempt before its retry).
func (w *worker) dropLastContextLocked() {
	n := len(w.context)
	w.count(w.context[n-1], -1)
	w.context[n-1] = nil
	w.context = w.context[:n-1]
}

// setContextLocked replaces the context (a session opened, compacted or
// switched).
func (w *worker) setContextLocked(msgs []*message) {
	w.context = msgs
	w.contextChars, w.contextAssistants = 0, 0
	for _, m := range msgs {
		w.count(m, 1)
	}
}

// count adds (sign 1) or removes (sign -1) m's share of the running totals.
func (w *worker) count(m *message, sign int) {
	w.contextChars += sign * m.llmChars()
	if m.Role == "assistant" {
		w.contextAssistants += sign
	}
}
