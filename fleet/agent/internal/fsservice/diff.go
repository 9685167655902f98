package fsservice

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"time"
	"unicode/utf8"

	"example.com/pifleet/transport"
)

// maxGitStderr is how much of git's stderr a git_failed message quotes.
const maxGitStderr = 16 << 10

func (s *Service) diff(ctx context.Context, req *transport.FsDiffFrame, res *transport.FsResultFrame) error {
	args, err := gitArgs(req)
	if err != nil {
		return err
	}
	// Only the first MaxPageBytes of output are ever sent, so capture just
	// past that (room for the rune the cut may split) and stop git there:
	// a huge diff costs neither memory nor the time to produce it all.
	stdout := &capWriter{max: MaxPageBytes + utf8.UTFMax}
	stderr := &capWriter{max: maxGitStderr}
	cmd := exec.CommandContext(ctx, s.git, args...)
	cmd.Dir = s.root
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// GIT_OPTIONAL_LOCKS=0: a read-only diff must not take the index lock
	// (git would otherwise refresh the index) under a working pi.
	cmd.Env = append(os.Environ(), "GIT_OPTIONAL_LOCKS=0", "GIT_TERMINAL_PROMPT=0")
	cmd.WaitDelay = 5 * time.Second
	runErr := cmd.Run()
	if ctx.Err() != nil {
		return errorf(CodeCanceled, "fs_diff canceled: %v", ctx.Err())
	}
	// When the capture filled up, git was cut off on purpose (it dies of
	// SIGPIPE); its exit status then says nothing about the diff.
	if runErr != nil && !stdout.full {
		msg := strings.TrimSpace(string(stderr.buf))
		if strings.Contains(msg, "Not a git repository") {
			// git then prints the usage of diff --no-index: not news.
			return errorf(CodeNotARepo, "%s is not inside a git repository", s.root)
		}
		if msg == "" {
			msg = runErr.Error()
		}
		var exitErr *exec.ExitError
		if errors.As(runErr, &exitErr) {
			return errorf(CodeGitFailed, "git %s failed (%v): %s", args[0], exitErr.ProcessState, msg)
		}
		return errorf(CodeGitFailed, "git %s: %s", args[0], msg)
	}
	out := stdout.buf
	if req.RevParse {
		out = bytes.TrimRight(out, "\r\n")
	}
	text, cut := cutUTF8(out, MaxPageBytes)
	res.Text, res.Truncated = &text, cut || stdout.full
	return nil
}

// gitArgs builds the git command line of an fs_diff request: git diff
// [--staged] [--stat] [<ref>] -- , or git rev-parse HEAD.
func gitArgs(req *transport.FsDiffFrame) ([]string, error) {
	if req.RevParse {
		return []string{"rev-parse", "HEAD"}, nil
	}
	if strings.HasPrefix(req.Ref, "-") {
		return nil, errorf(CodeGitFailed, "refusing ref %q: a ref must not start with \"-\"", req.Ref)
	}
	args := []string{"diff", "--no-color", "--no-ext-diff"}
	if req.Staged {
		args = append(args, "--staged")
	}
	if req.Stat {
		args = append(args, "--stat")
	}
	if req.Ref != "" {
		args = append(args, req.Ref)
	}
	// "--" ends the revisions: nothing after it could be read as a path or
	// an option, and an ambiguous ref is not taken for a file name.
	return append(args, "--"), nil
}

// capWriter keeps the first max bytes written to it; past that it fails,
// which makes os/exec close the pipe and git stop.
type capWriter struct {
	buf  []byte
	max  int  // bytes kept at most
	full bool // more than max bytes arrived
}

var errCaptureFull = errors.New("fsservice: capture full")

func (w *capWriter) Write(p []byte) (int, error) {
	room := w.max - len(w.buf)
	if len(p) > room {
		w.buf = append(w.buf, p[:room]...)
		w.full = true
		return room, errCaptureFull
	}
	w.buf = append(w.buf, p...)
	return len(p), nil
}

// cutUTF8 returns b as valid UTF-8 (each invalid byte becomes U+FFFD), cut
// on a rune boundary to at most limit bytes, and whether it was cut.
func cutUTF8(b []byte, limit int) (string, bool) {
	if len(b) <= limit && utf8.Valid(b) {
		return string(b), false
	}
	out := make([]byte, 0, min(len(b), limit))
	for len(b) > 0 {
		r, w := utf8.DecodeRune(b)
		if len(out)+utf8.RuneLen(r) > limit {
			return string(out), true
		}
		out = utf8.AppendRune(out, r)
		b = b[w:]
	}
	return string(out), false
}
