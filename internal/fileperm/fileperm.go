// Package fileperm finds state files and directories that other local
// users can reach: the doctors of both binaries report them, because the
// keys, tokens and databases in them are what stands between another user
// of the machine and the fleet.
package fileperm

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// Problem is one path whose mode gives group or other users access.
type Problem struct {
	Path string
	Mode fs.FileMode
}

func (p Problem) String() string {
	want := "0600"
	if p.Mode.IsDir() {
		want = "0700"
	}
	return fmt.Sprintf("%s is %#o (want %s: other users can reach it)", p.Path, p.Mode.Perm(), want)
}

// Check returns a Problem for every existing path with any group or other
// permission bit. Missing paths are skipped; other errors are returned.
func Check(paths ...string) ([]Problem, error) {
	var out []Problem
	var errs []error
	for _, p := range paths {
		st, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if st.Mode().Perm()&0o077 != 0 {
			out = append(out, Problem{Path: p, Mode: st.Mode()})
		}
	}
	return out, errors.Join(errs...)
}

// Summary is the doctor's one-line form of problems.
func Summary(problems []Problem) string {
	s := make([]string, len(problems))
	for i, p := range problems {
		s[i] = p.String()
	}
	return strings.Join(s, "; ")
}
