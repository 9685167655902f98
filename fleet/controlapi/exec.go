package controlapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"sync"
	"time"
)

// ExecBackend is the exec plane of Backend: commands run on an agent's
// machine for the operator (tests, builds), without a model turn. The
// agent must run with --exec-policy full and the machine's trust policy
// must be steer.
type ExecBackend interface {
	// Exec runs a command and returns how it ended. started is called
	// once the agent started it, output with every chunk in order (both
	// may be nil); neither is called after Exec returned. When ctx ends
	// first, the command is aborted.
	Exec(ctx context.Context, req ExecRequest, started func(ExecStarted), output func(ExecOutput)) (ExecResult, error)
	// ExecAbort aborts a running command of machine.
	ExecAbort(ctx context.Context, machine, execID string) error
	// Executions lists machine's running commands, then its recent ones,
	// newest first.
	Executions(ctx context.Context, machine string) ([]Execution, error)
}

// ExecRequest is a command to run (POST /v1/exec). Exactly one of Argv
// (executable and arguments, no shell) and Shell (a command line for the
// agent's shell) is set; Machine or InstanceID says where.
type ExecRequest struct {
	// Machine is the agent; with InstanceID it may be empty.
	Machine string `json:"machine,omitempty"`
	// InstanceID runs the command in that worker's working tree; Cwd is
	// then relative to it.
	InstanceID string   `json:"instanceId,omitempty"`
	Argv       []string `json:"argv,omitempty"`
	Shell      string   `json:"shell,omitempty"`
	Cwd        string   `json:"cwd,omitempty"`
	// TimeoutSeconds ends the command (0: the agent's default, 300 s).
	TimeoutSeconds float64 `json:"timeoutSeconds,omitempty"`
}

func (r ExecRequest) validate() error {
	switch {
	case r.Machine == "" && r.InstanceID == "":
		return badRequest("exec needs a machine or an instanceId")
	case (len(r.Argv) == 0) == (r.Shell == ""):
		return badRequest("exec needs exactly one of argv and shell")
	case r.InstanceID == "" && r.Cwd == "":
		return badRequest("exec on a machine needs a cwd")
	case r.TimeoutSeconds < 0:
		return badRequest("timeoutSeconds %v < 0", r.TimeoutSeconds)
	}
	return nil
}

// ExecStarted says the agent started the command.
type ExecStarted struct {
	Machine string `json:"machine"`
	ExecID  string `json:"execId"`
}

// ExecOutput is one chunk of output: Data is the command's bytes (base64
// in JSON). Untrusted: show it as such.
type ExecOutput struct {
	Seq    int    `json:"seq"`
	Stream string `json:"stream"` // "stdout" | "stderr"
	Data   []byte `json:"data"`
	// Dropped counts earlier chunks lost because the reader was too slow.
	Dropped int `json:"dropped,omitempty"`
}

// ExecResult is how the command ended, with the last 512 KiB of each
// stream as text (invalid UTF-8 replaced).
type ExecResult struct {
	Machine string `json:"machine"`
	ExecID  string `json:"execId"`
	// ExitCode is null when the process died of a signal or could not
	// start (the reason is on stderr).
	ExitCode        *int   `json:"exitCode"`
	Signal          string `json:"signal,omitempty"`
	TimedOut        bool   `json:"timedOut"`
	Aborted         bool   `json:"aborted"`
	DurationMs      int64  `json:"durationMs"`
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutTruncated bool   `json:"stdoutTruncated,omitempty"`
	StderrTruncated bool   `json:"stderrTruncated,omitempty"`
}

// Execution is one command in a machine's list.
type Execution struct {
	ExecID     string     `json:"execId"`
	Mode       string     `json:"mode"` // "argv" | "shell"
	Cwd        string     `json:"cwd"`
	State      string     `json:"state"` // "running" | "exited"
	StartedAt  time.Time  `json:"startedAt"`
	FinishedAt *time.Time `json:"finishedAt,omitempty"`
	ExitCode   *int       `json:"exitCode,omitempty"`
	TimedOut   bool       `json:"timedOut,omitempty"`
	Aborted    bool       `json:"aborted,omitempty"`
}

// ExecLine is one line of a streamed exec answer (POST /v1/exec?stream=1):
// exactly one field is set; the last line holds Result or Error.
type ExecLine struct {
	Started *ExecStarted `json:"started,omitempty"`
	Output  *ExecOutput  `json:"output,omitempty"`
	Result  *ExecResult  `json:"result,omitempty"`
	Error   *Error       `json:"error,omitempty"`
}

func (s *Server) registerExec(p string) {
	s.mux.HandleFunc("POST "+p+"/exec", s.exec)
	s.mux.HandleFunc("GET "+p+"/exec", s.executions)
	s.mux.HandleFunc("POST "+p+"/exec/{machine}/{id}/abort", s.execAbort)
}

// exec runs a command: a plain JSON result, or with ?stream=1 an NDJSON
// stream of ExecLines. A client that goes away aborts the command.
func (s *Server) exec(w http.ResponseWriter, r *http.Request) {
	var req ExecRequest
	if err := decode(r, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if r.URL.Query().Get("stream") == "" {
		res, err := s.b.Exec(r.Context(), req, nil, nil)
		s.reply(w, r, res, err)
		return
	}
	var (
		mu        sync.Mutex
		streaming bool
		finished  bool
	)
	enc := json.NewEncoder(w)
	flusher, _ := w.(http.Flusher)
	line := func(l ExecLine) {
		if finished {
			return
		}
		if !streaming {
			streaming = true
			w.Header().Set("Content-Type", ContentTypeNDJSON)
			w.WriteHeader(http.StatusOK)
		}
		_ = enc.Encode(l)
		if flusher != nil {
			flusher.Flush()
		}
	}
	res, err := s.b.Exec(r.Context(), req, func(st ExecStarted) {
		mu.Lock()
		defer mu.Unlock()
		line(ExecLine{Started: &st})
	}, func(o ExecOutput) {
		mu.Lock()
		defer mu.Unlock()
		line(ExecLine{Output: &o})
	})
	mu.Lock()
	defer mu.Unlock()
	if !streaming {
		finished = true
		s.reply(w, r, res, err)
		return
	}
	if err != nil {
		line(ExecLine{Error: asAPIError(err)})
	} else {
		line(ExecLine{Result: &res})
	}
	finished = true
}

func (s *Server) executions(w http.ResponseWriter, r *http.Request) {
	machine := r.URL.Query().Get("machine")
	if machine == "" {
		s.fail(w, r, badRequest("query parameter machine is required"))
		return
	}
	l, err := s.b.Executions(r.Context(), machine)
	if l == nil {
		l = []Execution{}
	}
	s.reply(w, r, l, err)
}

func (s *Server) execAbort(w http.ResponseWriter, r *http.Request) {
	s.reply(w, r, nil, s.b.ExecAbort(r.Context(), r.PathValue("machine"), r.PathValue("id")))
}

// Exec runs a command and returns how it ended. With output set, the
// answer is streamed and output receives every chunk in order; cancelling
// ctx aborts the command.
func (c *Client) Exec(ctx context.Context, req ExecRequest, output func(ExecOutput)) (ExecResult, error) {
	if output == nil {
		var res ExecResult
		err := c.call(ctx, http.MethodPost, "/exec", req, &res)
		return res, err
	}
	resp, err := c.do(ctx, http.MethodPost, "/exec?stream=1", req)
	if err != nil {
		return ExecResult{}, err
	}
	defer resp.Body.Close()
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != ContentTypeNDJSON {
		var res ExecResult
		if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
			return ExecResult{}, fmt.Errorf("controlapi: POST /exec: decode answer: %w", err)
		}
		return res, nil
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), MaxBodyBytes*2)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var l ExecLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return ExecResult{}, fmt.Errorf("controlapi: exec stream: %w", err)
		}
		switch {
		case l.Error != nil:
			return ExecResult{}, l.Error
		case l.Result != nil:
			return *l.Result, nil
		case l.Output != nil:
			output(*l.Output)
		}
	}
	if err := sc.Err(); err != nil {
		return ExecResult{}, fmt.Errorf("controlapi: exec stream: %w", err)
	}
	return ExecResult{}, errors.New("controlapi: exec stream ended without a result (server stopped?)")
}

// ExecAbort aborts a running command.
func (c *Client) ExecAbort(ctx context.Context, machine, execID string) error {
	return c.call(ctx, http.MethodPost, "/exec/"+seg(machine)+"/"+seg(execID)+"/abort", nil, nil)
}

// Executions lists a machine's running and recent commands.
func (c *Client) Executions(ctx context.Context, machine string) ([]Execution, error) {
	var out []Execution
	err := c.call(ctx, http.MethodGet, "/exec?machine="+url.QueryEscape(machine), nil, &out)
	return out, err
}
