package scripted

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
)

// The built-in tools pi enables by default.
var defaultTools = []string{"read", "bash", "edit", "write"}

// maxReadBytes caps what the read tool returns.
const maxReadBytes = 50 << 10

// toolResult is a finished tool call.
type toolResult struct {
	text    string
	details any // nil: no details field
	isError bool
}

func toolError(text string) toolResult {
	return toolResult{text: text, details: obj{}, isError: true}
}

// toolRunner runs tool calls in the worker's cwd and remembers running
// shells so that SIGTERM and abort can kill them.
type toolRunner struct {
	cwd     string
	allowed map[string]bool

	mu    sync.Mutex
	procs map[int]struct{} // process group ids of running shells
}

func newToolRunner(cwd string, cfg config) *toolRunner {
	names := defaultTools
	if cfg.tools != nil {
		names = cfg.tools
	}
	if cfg.noTools {
		names = nil
	}
	allowed := map[string]bool{}
	for _, n := range names {
		allowed[strings.TrimSpace(n)] = true
	}
	return &toolRunner{cwd: cwd, allowed: allowed, procs: map[int]struct{}{}}
}

// known reports whether a call of the tool will run (pi answers any other
// with "Tool <name> not found").
func (t *toolRunner) known(name string) bool {
	switch name {
	case "bash", "read", "write", "edit":
		return t.allowed[name]
	}
	return false
}

// run executes one call. update receives partial results (bash output so
// far).
func (t *toolRunner) run(ctx context.Context, name string, args json.RawMessage, update func(partial any)) toolResult {
	switch name {
	case "bash":
		var a struct {
			Command string `json:"command"`
		}
		if err := json.Unmarshal(args, &a); err != nil || a.Command == "" {
			return toolError("Validation failed for tool \"bash\": command is required")
		}
		return t.bash(ctx, a.Command, update)
	case "read":
		var a struct {
			Path string `json:"path"`
		}
		if err := json.Unmarshal(args, &a); err != nil || a.Path == "" {
			return toolError("Validation failed for tool \"read\": path is required")
		}
		return t.read(a.Path)
	case "write":
		var a struct {
			Path    string `json:"path"`
			Content string `json:"content"`
		}
		if err := json.Unmarshal(args, &a); err != nil || a.Path == "" {
			return toolError("Validation failed for tool \"write\": path is required")
		}
		return t.write(a.Path, a.Content)
	case "edit":
		var a struct {
			Path  string `json:"path"`
			Edits []struct {
				OldText string `json:"oldText"`
				NewText string `json:"newText"`
			} `json:"edits"`
		}
		if err := json.Unmarshal(args, &a); err != nil || a.Path == "" || len(a.Edits) == 0 {
			return toolError("Edit tool input is invalid. edits must contain at least one replacement.")
		}
		pairs := make([][2]string, len(a.Edits))
		for i, e := range a.Edits {
			pairs[i] = [2]string{e.OldText, e.NewText}
		}
		return t.edit(a.Path, pairs)
	}
	return toolError(fmt.Sprintf("Tool %s not found", name))
}

func (t *toolRunner) abs(path string) string {
	if filepath.IsAbs(path) {
		return path
	}
	return filepath.Join(t.cwd, path)
}

func (t *toolRunner) bash(ctx context.Context, command string, update func(any)) toolResult {
	pr, pw, err := os.Pipe()
	if err != nil {
		return toolError(err.Error())
	}
	cmd := exec.Command("sh", "-c", command)
	cmd.Dir = t.cwd
	cmd.Stdout, cmd.Stderr = pw, pw
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	update(obj{{"content", []part{}}})
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return toolError(err.Error())
	}
	pw.Close()
	pgid := cmd.Process.Pid
	t.mu.Lock()
	t.procs[pgid] = struct{}{}
	t.mu.Unlock()

	stop := context.AfterFunc(ctx, func() { _ = syscall.Kill(-pgid, syscall.SIGKILL) })
	var out strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := pr.Read(buf)
		if n > 0 {
			out.Write(buf[:n])
			update(obj{{"content", []part{textPart(out.String())}}, {"details", obj{}}})
		}
		if err != nil {
			break
		}
	}
	pr.Close()
	waitErr := cmd.Wait()
	stop()
	t.mu.Lock()
	delete(t.procs, pgid)
	t.mu.Unlock()

	text := out.String()
	withStatus := func(status string) string {
		if text == "" {
			return status
		}
		return text + "\n\n" + status
	}
	if ctx.Err() != nil {
		return toolError(withStatus("Command aborted"))
	}
	if text == "" {
		text = "(no output)"
	}
	var exitErr *exec.ExitError
	if errors.As(waitErr, &exitErr) {
		return toolError(withStatus(fmt.Sprintf("Command exited with code %d", exitErr.ExitCode())))
	}
	if waitErr != nil {
		return toolError(withStatus(waitErr.Error()))
	}
	return toolResult{text: text}
}

// killAll kills every running shell's process group (SIGTERM handling).
func (t *toolRunner) killAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for pgid := range t.procs {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}
}

func (t *toolRunner) read(path string) toolResult {
	abs := t.abs(path)
	f, err := os.Open(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return toolError(fmt.Sprintf("ENOENT: no such file or directory, access '%s'", abs))
	}
	if err != nil {
		return toolError(err.Error())
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxReadBytes+1))
	if err != nil {
		return toolError(err.Error())
	}
	text := string(b)
	if len(b) > maxReadBytes {
		text = string(b[:maxReadBytes]) + fmt.Sprintf("\n\n[Output truncated at %d bytes]", maxReadBytes)
	}
	return toolResult{text: text}
}

func (t *toolRunner) write(path, content string) toolResult {
	abs := t.abs(path)
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return toolError(err.Error())
	}
	if err := os.WriteFile(abs, []byte(content), 0o644); err != nil {
		return toolError(err.Error())
	}
	return toolResult{text: fmt.Sprintf("Successfully wrote %d bytes to %s", len(content), path)}
}

func (t *toolRunner) edit(path string, edits [][2]string) toolResult {
	abs := t.abs(path)
	b, err := os.ReadFile(abs)
	if err != nil {
		return toolError(err.Error())
	}
	text := string(b)
	for _, e := range edits {
		if strings.Count(text, e[0]) != 1 {
			return toolError(fmt.Sprintf("Could not find a unique match for the text to replace in %s.", path))
		}
		text = strings.Replace(text, e[0], e[1], 1)
	}
	if err := os.WriteFile(abs, []byte(text), 0o644); err != nil {
		return toolError(err.Error())
	}
	return toolResult{text: fmt.Sprintf("Successfully replaced %d block(s) in %s.", len(edits), path)}
}
