package e2ekit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"example.com/pifleet/internal/shim"
)

// Sub-directories and file names of an agent's state directory (see
// fleet/agent: agent.go, handles.go, and internal/worker's socketPath).
const (
	workersDir = "workers"
	handlesDir = "handles"
	logSuffix  = ".shim.log"
)

// StopGrace is how long a shim stopped by Sweep waits after closing its
// worker's stdin before SIGTERM, and again before SIGKILL.
const StopGrace = time.Second

// SweepTimeout bounds the cleanup CleanupWorkers registers.
const SweepTimeout = 30 * time.Second

// How says how Sweep ended a shim.
type How string

// The ways Sweep ends a shim.
const (
	// Stopped: attached with the agent's handle and stopped through the
	// shim's own stop procedure; the exit was acknowledged, so the shim
	// ended on its own.
	Stopped How = "stopped through its socket"
	// Terminated: no usable handle; the shim process got SIGTERM, which
	// stops its worker's process group, and ended.
	Terminated How = "SIGTERM to the shim"
	// Killed: the shim ignored the above for too long and got SIGKILL; its
	// watchdog then takes the worker's process group down.
	Killed How = "SIGKILL to the shim"
)

// Leftover is a shim that was still there when Sweep ran.
type Leftover struct {
	// InstanceID is the worker's instance id (from the handle, or from the
	// shim's log file name).
	InstanceID string
	// ShimPID is the shim's pid, 0 when unknown.
	ShimPID int
	// WorkerRunning is whether the worker itself still ran; false means
	// only the shim lingered, holding an exit nobody acknowledged, or
	// (How other than Stopped) that the shim could not be asked.
	WorkerRunning bool
	// How says how Sweep ended it.
	How How
}

func (l Leftover) String() string {
	var what string
	switch {
	case l.How != Stopped:
		what = "the shim of " + l.InstanceID + ", found by its log"
	case l.WorkerRunning:
		what = "the running worker " + l.InstanceID
	default:
		what = "the shim of " + l.InstanceID + ", holding its worker's unacknowledged exit"
	}
	if l.ShimPID > 0 {
		what += fmt.Sprintf(" (shim pid %d)", l.ShimPID)
	}
	return what + ": " + string(l.How)
}

// handle is the part of an agent's handles/<id>.json (worker.Persisted)
// that attaching needs.
type handle struct {
	InstanceID string `json:"instanceId"`
	Socket     string `json:"socket"`
	Token      string `json:"token"`
}

// CleanupWorkers registers a cleanup that runs Sweep on stateDir (an
// agent's --state-dir) and fails the test for every shim it found, naming
// each. Call it before the agent starts, so that it runs after the
// agent's own cleanup has ended the agent (cleanups run last first).
func CleanupWorkers(t testing.TB, stateDir string) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), SweepTimeout)
		defer cancel()
		left, err := Sweep(ctx, stateDir)
		for _, l := range left {
			t.Errorf("left behind in %s: %s", stateDir, l)
		}
		if err != nil {
			t.Errorf("sweeping %s: %v", stateDir, err)
		}
	})
}

// Sweep ends every shim that still serves in stateDir and reports each.
// The error lists what could not be done (a shim that may still run);
// a state directory without workers is not an error.
func Sweep(ctx context.Context, stateDir string) ([]Leftover, error) {
	var left []Leftover
	var errs []error
	handles, err := readHandles(filepath.Join(stateDir, handlesDir))
	if err != nil {
		errs = append(errs, err)
	}
	stopped := map[int]bool{} // pids of the shims stopped through their socket
	for _, h := range handles {
		l, ok, err := stopAttached(ctx, h)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			left = append(left, l)
			stopped[l.ShimPID] = true
		}
	}
	// The kernel names open files by their real path.
	workers := filepath.Join(stateDir, workersDir)
	if real, err := filepath.EvalSymlinks(workers); err == nil {
		workers = real
	}
	more, err := endShimProcesses(ctx, workers, stopped)
	left = append(left, more...)
	if err != nil {
		errs = append(errs, err)
	}
	return left, errors.Join(errs...)
}

// readHandles reads every handles/<id>.json; a missing directory has
// none.
func readHandles(dir string) ([]handle, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []handle
	var errs []error
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var h handle
		if err := json.Unmarshal(b, &h); err != nil || h.InstanceID == "" || h.Token == "" || h.Socket == "" {
			// An unreadable handle: its shim, if any, is found by its log.
			continue
		}
		out = append(out, h)
	}
	return out, errors.Join(errs...)
}

// stopAttached attaches to the shim on h's socket with h's token and
// stops it. ok is false when no shim serves there, or another one does (a
// generation started later with a new token): the process scan finds
// that one.
func stopAttached(ctx context.Context, h handle) (l Leftover, ok bool, err error) {
	socket := h.Socket
	c, err := shim.Attach(ctx, shim.AttachConfig{Socket: socket, InstanceID: h.InstanceID, Token: h.Token})
	switch {
	case errors.Is(err, shim.ErrNoShim), errors.Is(err, shim.ErrWrongShim):
		return l, false, nil
	case err != nil && !socketExists(socket):
		// The shim finished meanwhile (an agent acknowledged its exit
		// just before): it removes its socket before it closes
		// connections.
		return l, false, nil
	case err != nil:
		return l, false, fmt.Errorf("attach to %s: %w", socket, err)
	}
	defer c.Close()
	st := c.Attached()
	l = Leftover{InstanceID: h.InstanceID, ShimPID: st.ShimPID, WorkerRunning: st.Running, How: Stopped}
	if st.Running {
		if err := c.Stop(ctx, shim.StopOptions{CloseStdin: true, Grace: StopGrace}); err != nil &&
			!errors.Is(err, shim.ErrExited) {
			return l, true, fmt.Errorf("stop %s: %w", h.InstanceID, err)
		}
	}
	// Take the stream to its exit and acknowledge it: the shim then
	// removes its socket and ends.
	for {
		select {
		case ev, open := <-c.Events():
			if !open {
				return l, true, nil
			}
			if err := c.Ack(ev.Seq); err != nil && ev.Kind == shim.EventExit {
				return l, true, fmt.Errorf("acknowledge the exit of %s: %w", h.InstanceID, err)
			}
		case <-ctx.Done():
			return l, true, fmt.Errorf("stop %s: the worker did not exit: %w", h.InstanceID, ctx.Err())
		}
	}
}

// shimProcess is a process whose stderr is a shim log in the workers
// directory: a shim, whatever its pid.
type shimProcess struct {
	pid        int
	instanceID string
}

// instanceOfLog returns the instance id a shim log path names, and
// whether the path is a shim log in dir.
func instanceOfLog(dir, path string) (string, bool) {
	// /proc shows a removed file's path with this suffix.
	path = strings.TrimSuffix(path, " (deleted)")
	if filepath.Dir(path) != dir {
		return "", false
	}
	id, ok := strings.CutSuffix(filepath.Base(path), logSuffix)
	return id, ok && id != ""
}

func socketExists(path string) bool {
	st, err := os.Lstat(path)
	return err == nil && st.Mode().Type() == fs.ModeSocket
}

// serving reports whether a socket of instance id's shims is in dir
// (<id>.sock, or <id>-<n>.sock for a later generation). A shim removes
// its socket first when it finishes, so one without a socket is ending
// on its own.
func serving(dir, id string) bool {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		name := e.Name()
		rest, ok := strings.CutPrefix(name, id)
		if !ok || e.Type() != fs.ModeSocket {
			continue
		}
		if rest == ".sock" || strings.HasPrefix(rest, "-") && strings.HasSuffix(rest, ".sock") {
			return true
		}
	}
	return false
}
