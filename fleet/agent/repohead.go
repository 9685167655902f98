package agent

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"example.com/pifleet/transport"
)

// repoHeadTimeout bounds one git rev-parse: HEAD is read from a few small
// files, so anything slower is a stuck filesystem.
const repoHeadTimeout = 10 * time.Second

// Error codes of repo_head_result.
const (
	CodeNotARepo  = "not_a_repo"
	CodeGitFailed = "git_failed"
)

// repoHead answers repo_head: the commit HEAD points to in cwd, read with
// git rev-parse (which knows packed refs, worktrees and the like), without
// taking any lock.
func (a *Agent) repoHead(ctx context.Context, f *transport.RepoHeadFrame) transport.Frame {
	out := &transport.RepoHeadResultFrame{Cwd: f.Cwd}
	out.ID = f.ID
	head, err := gitHead(ctx, f.Cwd)
	if err != nil {
		var he *headError
		if errors.As(err, &he) {
			out.Error = &transport.FsError{Code: he.code, Message: he.msg}
		} else {
			out.Error = &transport.FsError{Code: CodeGitFailed, Message: err.Error()}
		}
		return out
	}
	out.Head = head
	return out
}

type headError struct{ code, msg string }

func (e *headError) Error() string { return e.code + ": " + e.msg }

// gitHead returns the full commit id of HEAD in dir.
func gitHead(ctx context.Context, dir string) (string, error) {
	if dir == "" || !filepath.IsAbs(dir) {
		return "", &headError{"not_found", "cwd " + dir + " is not an absolute path"}
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return "", &headError{"not_found", "cwd " + dir + " is not a directory"}
	}
	ctx, cancel := context.WithTimeout(ctx, repoHeadTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "git", "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(os.Environ(), "GIT_OPTIONAL_LOCKS=0", "GIT_TERMINAL_PROMPT=0")
	cmd.WaitDelay = time.Second
	err := cmd.Run()
	head := strings.TrimSpace(stdout.String())
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return "", &headError{CodeGitFailed, "git rev-parse: " + ctx.Err().Error()}
	case errors.As(err, &exitErr):
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = "no commit at HEAD (not a git repository, or no commit yet)"
		}
		return "", &headError{CodeNotARepo, dir + ": " + msg}
	case err != nil:
		return "", &headError{CodeGitFailed, "git rev-parse: " + err.Error()}
	case !isHex(head) || (len(head) != 40 && len(head) != 64):
		return "", &headError{CodeGitFailed, "git rev-parse printed " + head}
	}
	return head, nil
}

func isHex(s string) bool {
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return s != ""
}
