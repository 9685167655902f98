package execplane

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// audit appends one JSON line per start and per exit to a file only the
// agent's user can read (0600): who ran what, where, and how it ended —
// never the output.
type audit struct {
	mu   sync.Mutex
	path string
	f    *os.File
}

// auditRecord is one line of the audit log.
type auditRecord struct {
	At         string   `json:"at"`
	Event      string   `json:"event"` // "start" | "exit"
	ExecID     string   `json:"execId"`
	Mode       string   `json:"mode"`
	Cwd        string   `json:"cwd"`
	Command    string   `json:"command,omitempty"`
	Executable string   `json:"executable,omitempty"`
	Args       []string `json:"args,omitempty"`
	InstanceID string   `json:"instanceId,omitempty"`
	Owner      string   `json:"owner,omitempty"`
	State      string   `json:"state"`
	StartedAt  float64  `json:"startedAt"`
	TimeoutMs  float64  `json:"timeoutMs,omitempty"`
	FinishedAt *float64 `json:"finishedAt,omitempty"`
	ExitCode   *float64 `json:"exitCode,omitempty"`
	Signal     *string  `json:"signal,omitempty"`
	TimedOut   bool     `json:"timedOut,omitempty"`
	Aborted    bool     `json:"aborted,omitempty"`
	DurationMs *float64 `json:"durationMs,omitempty"`
	Error      string   `json:"error,omitempty"`
}

func openAudit(path string) (*audit, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("exec audit log: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("exec audit log: %w", err)
	}
	// A file that existed with a wider mode is narrowed: the log names
	// every command run on this machine.
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, fmt.Errorf("exec audit log: %w", err)
	}
	return &audit{path: path, f: f}, nil
}

// write appends r as one line in one write call.
func (a *audit) write(at time.Time, r auditRecord) error {
	r.At = at.UTC().Format("2006-01-02T15:04:05.000Z")
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return fmt.Errorf("exec audit log %s is closed", a.path)
	}
	if _, err := a.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("exec audit log: %w", err)
	}
	return nil
}

func (a *audit) close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.f == nil {
		return nil
	}
	err := a.f.Close()
	a.f = nil
	return err
}
