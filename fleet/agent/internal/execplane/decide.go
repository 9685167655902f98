package execplane

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"time"

	"example.com/pifleet/transport"
)

// admission is what decideStart needs to know about the world; the driver
// gathers it (realpaths, the active count) before asking.
type admission struct {
	active, max   int
	req           Request
	cwdReal       string   // realpath of req.Cwd; "" when it does not resolve
	rootsReal     []string // realpaths of the configured roots that exist
	rootsSet      bool     // roots were configured (even if none exists)
	defTimeout    time.Duration
	maxTimeout    time.Duration
	instanceRoot  string // realpath of the instance's cwd, when the exec names one
	instanceGiven bool
}

// decideStart applies the start checks of reference 1.17 in their order:
// capacity, timeout, the mode's required field, cwd, roots. It returns the
// effective timeout or a *StartError.
func decideStart(a admission) (time.Duration, error) {
	if a.active >= a.max {
		return 0, startErr(CodeCapacity, "execution capacity reached: %d/%d", a.active, a.max)
	}
	timeout := a.defTimeout
	if t := a.req.TimeoutSeconds; t != nil {
		if math.IsNaN(*t) || math.IsInf(*t, 0) || *t <= 0 {
			return 0, startErr(CodeBadRequest, "timeoutSeconds must be a finite number > 0, not %v", *t)
		}
		timeout = time.Duration(*t * float64(time.Second))
	}
	timeout = min(timeout, a.maxTimeout)
	switch a.req.Mode {
	case transport.ExecShell:
		if a.req.Command == "" {
			return 0, startErr(CodeBadRequest, "shell mode needs a command")
		}
	case transport.ExecArgv:
		if a.req.Executable == "" {
			return 0, startErr(CodeBadRequest, "argv mode needs an executable")
		}
	default:
		return 0, startErr(CodeBadRequest, "mode %q: want shell or argv", a.req.Mode)
	}
	if a.cwdReal == "" {
		return 0, startErr(CodeBadCwd, "cwd %s does not exist", a.req.Cwd)
	}
	if a.instanceGiven && !within(a.instanceRoot, a.cwdReal) {
		return 0, startErr(CodeOutsideRoots, "cwd %s is outside the instance's working tree %s", a.req.Cwd, a.instanceRoot)
	}
	if a.rootsSet {
		ok := false
		for _, r := range a.rootsReal {
			if within(r, a.cwdReal) {
				ok = true
				break
			}
		}
		if !ok {
			return 0, startErr(CodeOutsideRoots, "cwd is outside configured exec roots")
		}
	}
	return timeout, nil
}

// within reports whether p is root or lies under it (both clean and
// absolute).
func within(root, p string) bool {
	if p == root {
		return true
	}
	if root == string(filepath.Separator) {
		return strings.HasPrefix(p, root)
	}
	return strings.HasPrefix(p, root+string(filepath.Separator))
}

// ending is how an execution is being ended. The first reason wins: an
// abort after a timeout still reports timedOut only, and neither changes
// once the process exited.
type ending struct {
	aborted, timedOut, exited bool
}

// cause is what asks an execution to end.
type cause int

const (
	causeAbort cause = iota + 1
	causeTimeout
	causeExit
)

// decideEnd returns the next ending and whether the process group must be
// terminated now (SIGTERM, then SIGKILL after the grace period).
func decideEnd(e ending, c cause) (ending, bool) {
	if e.exited {
		return e, false
	}
	switch c {
	case causeExit:
		e.exited = true
		return e, false
	case causeAbort, causeTimeout:
		if e.aborted || e.timedOut {
			return e, false // already terminating
		}
		if c == causeAbort {
			e.aborted = true
		} else {
			e.timedOut = true
		}
		return e, true
	}
	return e, false
}

func startErr(code, format string, args ...any) *StartError {
	return &StartError{Code: code, Message: fmt.Sprintf(format, args...)}
}
