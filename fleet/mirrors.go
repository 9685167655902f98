package fleet

import (
	"errors"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sync"

	"github.com/rs/zerolog"

	"example.com/pifleet/session"
)

// mirrorSet is the open session mirrors: the entries of workers' session
// files, copied into the state directory by catch-ups, one Mirror per
// machine and session path.
//
// Its lock guards the map, and is held while a mirror is opened, so that
// one file never has two Mirrors. It may be taken with Fleet.mu held, and
// takes no other lock.
type mirrorSet struct {
	stateDir string
	log      zerolog.Logger

	mu   sync.Mutex
	open map[string]*session.Mirror // by machine and session path
}

func newMirrorSet(stateDir string, log zerolog.Logger) *mirrorSet {
	return &mirrorSet{stateDir: stateDir, log: log.With().Str("component", "fleet").Logger(), open: map[string]*session.Mirror{}}
}

// MirrorPath returns the file where the fleet mirrors the entries of the
// session at path on machine.
func (f *Fleet) MirrorPath(machine, path string) string {
	return mirrorPath(f.cfg.StateDir, machine, path)
}

func mirrorPath(stateDir, machine, path string) string {
	return filepath.Join(stateDir, "sessions", url.PathEscape(machine), url.PathEscape(filepath.Base(path)))
}

// mirror returns the open mirror of the session at path on machine,
// opening it on first use.
func (f *Fleet) mirror(machine, path string) (*session.Mirror, error) {
	return f.mirrors.get(machine, path)
}

func (ms *mirrorSet) get(machine, path string) (*session.Mirror, error) {
	key := machine + "\x00" + path
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if m := ms.open[key]; m != nil {
		return m, nil
	}
	mp := mirrorPath(ms.stateDir, machine, path)
	m, err := session.OpenMirror(mp)
	if err != nil {
		var le *session.LineError
		if !errors.As(err, &le) {
			return nil, err
		}
		// Damaged: start it again from the agent's file.
		ms.log.Warn().Err(err).Str("mirror", mp).Msg("session mirror damaged; fetching it again")
		if err := os.Remove(mp); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		if m, err = session.OpenMirror(mp); err != nil {
			return nil, err
		}
	}
	ms.open[key] = m
	return m, nil
}

// close closes every open mirror.
func (ms *mirrorSet) close() {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	for k, m := range ms.open {
		_ = m.Close()
		delete(ms.open, k)
	}
}
