package controlapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sync"
)

// Tools is the tool catalogue an orchestrating LLM drives the fleet with
// (package fleet/catalog is pifleet-server's). The server serves it under
// /v1/tools and /v1/wakes when WithTools is given; the MCP server and the pi
// extension are thin clients of those endpoints, so every serving of the
// catalogue runs the very same code on the server.
type Tools interface {
	// List describes every tool, in a stable order.
	List() []ToolInfo
	// Call runs a tool with its JSON arguments. progress (never nil) may be
	// called from other goroutines while Call runs, never after it returned.
	// An unknown name is an *Error of code unknown_tool.
	Call(ctx context.Context, name string, args json.RawMessage, progress func(ToolProgress)) (ToolResult, error)
	// Wakes subscribes to what should wake the orchestrator (a durable
	// task_done, an escalation). With pending it also returns the wakes of
	// every task now waiting for review or for a human, so a client that
	// reconnects misses none; live then carries the later ones (never one
	// of pending again) until ctx is done, when it is closed. A client
	// delivers each Key once.
	Wakes(ctx context.Context, pending bool) (pendingWakes []Wake, live <-chan Wake, err error)
}

// WithTools serves t under /v1/tools and /v1/wakes.
func WithTools(t Tools) ServerOption { return func(s *Server) { s.catalogue = t } }

// ToolInfo describes one tool of the catalogue (GET /v1/tools).
type ToolInfo struct {
	Name string `json:"name"`
	// Title is a short human-readable name.
	Title string `json:"title,omitempty"`
	// Description is written for a model: what the tool does, when to use
	// it, what it returns.
	Description string `json:"description"`
	// InputSchema is the JSON Schema (an object) of the arguments.
	InputSchema json.RawMessage `json:"inputSchema"`
	// ReadOnly: the tool changes nothing. Destructive: it may end work
	// (stop, abort, reject).
	ReadOnly    bool `json:"readOnly,omitempty"`
	Destructive bool `json:"destructive,omitempty"`
	// TimeoutSeconds is the longest a call may take on the server; a
	// client waits a little longer before it gives up.
	TimeoutSeconds float64 `json:"timeoutSeconds"`
}

// ToolProgress is one progress step of a running call.
type ToolProgress struct {
	Message string `json:"message"`
	// Progress counts up (elapsed seconds, files fetched); Total, when
	// known, is where it ends.
	Progress float64 `json:"progress"`
	Total    float64 `json:"total,omitempty"`
}

// ToolResult is what a call returns to the model: text, bounded by the
// tool.
type ToolResult struct {
	Text string `json:"text"`
	// Details is structured data for the client program (not for the
	// model), e.g. the ids a call created.
	Details map[string]string `json:"details,omitempty"`
}

// ToolLine is one line of a tool call's answer (application/x-ndjson):
// progress lines, then one line with the result or the error.
type ToolLine struct {
	Progress *ToolProgress `json:"progress,omitempty"`
	Result   *ToolResult   `json:"result,omitempty"`
	Error    *Error        `json:"error,omitempty"`
}

// WakeKind says why the orchestrator is woken.
type WakeKind string

// Wake kinds.
const (
	// WakeTaskDone: a task finished a run and awaits review.
	WakeTaskDone WakeKind = "task_done"
	// WakeEscalated: a task was rejected more often than its bundle allows
	// and waits for a human.
	WakeEscalated WakeKind = "escalated"
)

// Wake is one thing that should wake the orchestrating LLM (GET
// /v1/wakes).
type Wake struct {
	// Key is unique per wake (task id and task_done seq): deliver a key
	// once, however often it is received.
	Key        string   `json:"key"`
	Kind       WakeKind `json:"kind"`
	TaskID     string   `json:"taskId"`
	InstanceID string   `json:"instanceId,omitempty"`
	Agent      string   `json:"agent,omitempty"`
	Seq        int64    `json:"seq,omitempty"`
	Status     string   `json:"status,omitempty"`
	// Text is the message for the model, worker output in it framed as
	// untrusted data.
	Text string `json:"text"`
}

// ---- server side ----

func (s *Server) routeTools(p string) {
	s.mux.HandleFunc("GET "+p+"/tools", s.listTools)
	s.mux.HandleFunc("POST "+p+"/tools/{name}", s.callTool)
	s.mux.HandleFunc("GET "+p+"/wakes", s.wakes)
}

func (s *Server) noTools(w http.ResponseWriter, r *http.Request) bool {
	if s.catalogue != nil {
		return false
	}
	s.fail(w, r, &Error{Code: CodeNotSupported, Message: "this server serves no tool catalogue"})
	return true
}

func (s *Server) listTools(w http.ResponseWriter, r *http.Request) {
	if s.noTools(w, r) {
		return
	}
	ts := s.catalogue.List()
	if ts == nil {
		ts = []ToolInfo{}
	}
	writeJSON(w, http.StatusOK, ts)
}

// callTool answers with an NDJSON stream from the start: the call may
// block for minutes, and the client sees its progress as it comes.
func (s *Server) callTool(w http.ResponseWriter, r *http.Request) {
	if s.noTools(w, r) {
		return
	}
	name := r.PathValue("name")
	known := false
	for _, t := range s.catalogue.List() {
		known = known || t.Name == name
	}
	if !known {
		s.fail(w, r, &Error{Code: CodeUnknownTool, Message: fmt.Sprintf("no tool %q", name), Hint: "GET /v1/tools lists the tools"})
		return
	}
	args, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, MaxBodyBytes))
	if err != nil {
		s.fail(w, r, badRequest("body: %v", err))
		return
	}
	if len(bytes.TrimSpace(args)) == 0 {
		args = []byte("{}")
	}
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", ContentTypeNDJSON)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if flusher != nil {
		flusher.Flush()
	}
	var (
		mu       sync.Mutex
		finished bool
	)
	enc := json.NewEncoder(w)
	line := func(l ToolLine) {
		_ = enc.Encode(l)
		if flusher != nil {
			flusher.Flush()
		}
	}
	res, err := s.catalogue.Call(r.Context(), name, args, func(p ToolProgress) {
		mu.Lock()
		defer mu.Unlock()
		if !finished {
			line(ToolLine{Progress: &p})
		}
	})
	mu.Lock()
	defer mu.Unlock()
	finished = true
	if err != nil {
		if r.Context().Err() != nil {
			return // the client went away
		}
		line(ToolLine{Error: asAPIError(err)})
		return
	}
	line(ToolLine{Result: &res})
}

// wakes streams Wakes as server-sent events ("event: wake").
func (s *Server) wakes(w http.ResponseWriter, r *http.Request) {
	if s.noTools(w, r) {
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		s.fail(w, r, &Error{Code: CodeInternal, Message: "streaming not supported by this connection"})
		return
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	pending := r.URL.Query().Get("pending")
	if pending != "" && pending != "true" && pending != "false" {
		s.fail(w, r, badRequest("pending %q is not true or false", pending))
		return
	}
	first, ch, err := s.catalogue.Wakes(ctx, pending == "true")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", ContentTypeSSE)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if _, err := io.WriteString(w, ": watching\n\n"); err != nil {
		return
	}
	for _, wk := range first {
		if writeWake(w, wk) != nil {
			return
		}
	}
	// The comment tells a client that the pending wakes are all out.
	if _, err := io.WriteString(w, ": live\n\n"); err != nil {
		return
	}
	flusher.Flush()
	for {
		select {
		case <-ctx.Done():
			return
		case wk, ok := <-ch:
			if !ok {
				return
			}
			if writeWake(w, wk) != nil {
				return
			}
			flusher.Flush()
		}
	}
}

func writeWake(w io.Writer, wk Wake) error {
	data, err := json.Marshal(wk)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "event: wake\ndata: %s\n\n", data)
	return err
}

// ---- client side ----

// ListTools returns the server's tool catalogue.
func (c *Client) ListTools(ctx context.Context) ([]ToolInfo, error) {
	var ts []ToolInfo
	err := c.call(ctx, http.MethodGet, "/tools", nil, &ts)
	return ts, err
}

// CallTool runs a tool of the catalogue with its JSON arguments (nil: no
// arguments); progress (may be nil) receives the steps as they stream in.
// A refusal of the tool is an *Error (with a Hint for the model).
func (c *Client) CallTool(ctx context.Context, name string, args json.RawMessage, progress func(ToolProgress)) (ToolResult, error) {
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	resp, err := c.do(ctx, http.MethodPost, "/tools/"+seg(name), args)
	if err != nil {
		return ToolResult{}, err
	}
	defer resp.Body.Close()
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != ContentTypeNDJSON {
		return ToolResult{}, fmt.Errorf("controlapi: tool %s: answer is %q, not a stream", name, mt)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 4096), 4*MaxBodyBytes)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var l ToolLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return ToolResult{}, fmt.Errorf("controlapi: tool %s: %w", name, err)
		}
		switch {
		case l.Error != nil:
			return ToolResult{}, l.Error
		case l.Result != nil:
			return *l.Result, nil
		case l.Progress != nil && progress != nil:
			progress(*l.Progress)
		}
	}
	if err := sc.Err(); err != nil {
		if ctx.Err() != nil {
			return ToolResult{}, ctx.Err()
		}
		return ToolResult{}, fmt.Errorf("controlapi: tool %s: %w", name, err)
	}
	return ToolResult{}, errors.New("controlapi: tool " + name + ": the answer ended without a result (server stopped?)")
}

// Wakes opens the wake stream (see Tools.Wakes). It returns once the server
// confirmed the subscription.
func (c *Client) Wakes(ctx context.Context, pending bool) (*WakeStream, error) {
	path := "/wakes"
	if pending {
		path += "?pending=true"
	}
	es, err := c.openEvents(ctx, path, "wakes")
	if err != nil {
		return nil, err
	}
	return &WakeStream{es}, nil
}

// WakeStream is an open wake stream.
type WakeStream struct{ *eventStream }

// Next returns the next wake; io.EOF when the server ended the stream.
func (s *WakeStream) Next() (Wake, error) {
	var w Wake
	err := s.next(&w)
	return w, err
}

// TokenMatches reports, in constant time, whether got is the bearer token
// want (never for an empty want): for servers that guard other endpoints
// with the control API's token.
func TokenMatches(got, want string) bool { return want != "" && tokenMatches(got, want) }
