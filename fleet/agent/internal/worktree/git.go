package worktree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// gitTimeout bounds one git command (a merge of a big tree included).
const gitTimeout = 2 * time.Minute

// Git runs the git executable.
type Git struct {
	// Bin is the git executable (default "git", looked up in PATH).
	Bin string
	// Env is the base environment (default os.Environ()).
	Env []string
}

func (g Git) bin() string {
	if g.Bin == "" {
		return "git"
	}
	return g.Bin
}

// Available reports whether git can be run.
func (g Git) Available() error {
	if _, err := exec.LookPath(g.bin()); err != nil {
		return &Error{Code: CodeNoGit, Message: "git is not installed on this machine (" + err.Error() + ")"}
	}
	return nil
}

// gitError is a git command that failed, with its stderr.
type gitError struct {
	args   []string
	stderr string
	code   int
	err    error
}

func (e *gitError) Error() string {
	msg := strings.TrimSpace(e.stderr)
	if msg == "" {
		msg = e.err.Error()
	}
	return fmt.Sprintf("git %s: %s", strings.Join(e.args, " "), msg)
}

// run runs git in dir with extra environment; stdout is returned.
func (g Git) run(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, gitTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, g.bin(), args...)
	cmd.Dir = dir
	base := g.Env
	if base == nil {
		base = os.Environ()
	}
	// Plain, predictable output; never a prompt, a pager or an editor.
	cmd.Env = append(append(base, "LC_ALL=C", "GIT_TERMINAL_PROMPT=0", "GIT_PAGER=cat", "GIT_EDITOR=true",
		"GIT_OPTIONAL_LOCKS=0"), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		ge := &gitError{args: args, stderr: stderr.String(), err: err, code: -1}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			ge.code = ee.ExitCode()
		}
		return stdout.String(), ge
	}
	return stdout.String(), nil
}

// line runs git and returns its first output line.
func (g Git) line(ctx context.Context, dir string, args ...string) (string, error) {
	out, err := g.run(ctx, dir, nil, args...)
	if err != nil {
		return "", err
	}
	l, _, _ := strings.Cut(out, "\n")
	return strings.TrimSpace(l), nil
}
