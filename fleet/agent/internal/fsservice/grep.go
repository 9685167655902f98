package fsservice

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	"example.com/pifleet/transport"
)

// grepSkipDirs are directory names fs_grep never enters, at any depth.
var grepSkipDirs = map[string]bool{".git": true, "node_modules": true, ".fleet-worktrees": true}

// errGrepFull stops the walk once the answer is complete.
var errGrepFull = errors.New("fsservice: grep answer full")

func (s *Service) grep(ctx context.Context, req *transport.FsGrepFrame, res *transport.FsResultFrame) error {
	re, err := regexp.Compile(req.Pattern)
	if err != nil {
		return errorf(CodeBadPattern, "invalid pattern %q: %v", req.Pattern, err)
	}
	var glob *Glob
	if req.Glob != "" {
		glob = CompileGlob(req.Glob)
	}
	// The reference walks the cwd as given, not realpath'd; the os.Root
	// keeps every open inside it.
	root, err := os.OpenRoot(s.root)
	if err != nil {
		return osError(err, s.root)
	}
	defer root.Close()

	g := grepper{re: re}
	err = fs.WalkDir(root.FS(), ".", func(rel string, d fs.DirEntry, err error) error {
		if err != nil {
			if rel == "." {
				return err
			}
			return nil // an unreadable directory is skipped, as a file would be
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		switch {
		case d.IsDir():
			if rel != "." && grepSkipDirs[d.Name()] {
				return fs.SkipDir
			}
			return nil
		case !d.Type().IsRegular(): // symlinks are not followed; devices, sockets, FIFOs skipped
			return nil
		case glob != nil && !glob.Match(rel):
			return nil
		}
		data, ok := readGrepFile(root, rel, g.buf)
		g.buf = data[:0]
		if !ok {
			return nil
		}
		return g.file(rel, data)
	})
	if err != nil && !errors.Is(err, errGrepFull) {
		if ctx.Err() != nil {
			return errorf(CodeCanceled, "fs_grep canceled: %v", ctx.Err())
		}
		return osError(err, s.root)
	}
	text := g.out.String()
	res.Text, res.Truncated = &text, g.truncated
	return nil
}

// readGrepFile reads a file fs_grep searches into buf (reused between
// files), or reports false for a file it skips: unreadable, larger than
// GrepMaxFileBytes, or containing NUL.
func readGrepFile(root *os.Root, rel string, buf []byte) ([]byte, bool) {
	f, err := root.OpenFile(filepath.FromSlash(rel), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return buf, false
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > GrepMaxFileBytes {
		return buf, false
	}
	// One byte more than the size seen, to notice a file that grew.
	if need := int(fi.Size()) + 1; cap(buf) < need {
		buf = make([]byte, need)
	}
	buf = buf[:cap(buf)]
	n, err := io.ReadFull(io.LimitReader(f, GrepMaxFileBytes+1), buf[:min(len(buf), GrepMaxFileBytes+1)])
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		return buf, false
	}
	data := buf[:n]
	if n > GrepMaxFileBytes || n == len(buf) || bytes.IndexByte(data, 0) >= 0 {
		return buf, false // too large, grew past the buffer, or binary
	}
	return data, true
}

// grepper collects fs_grep's answer.
type grepper struct {
	re        *regexp.Regexp
	buf       []byte // file contents, reused
	out       strings.Builder
	matches   int
	truncated bool
}

// file tests every line of one file (split on LF, so a final LF makes a
// last empty line, as in the reference). It returns errGrepFull once a
// match beyond the cap shows that the answer is truncated.
func (g *grepper) file(rel string, data []byte) error {
	for lineNo := 1; ; lineNo++ {
		line, rest, more := bytes.Cut(data, []byte{'\n'})
		if g.re.Match(line) {
			if g.matches == GrepMaxMatches {
				g.truncated = true
				return errGrepFull
			}
			entry := rel + ":" + strconv.Itoa(lineNo) + ":" + snippet(line, GrepMaxLineChars)
			if g.out.Len()+1+len(entry) > MaxGrepBytes {
				g.truncated = true
				return errGrepFull
			}
			if g.matches > 0 {
				g.out.WriteByte('\n')
			}
			g.out.WriteString(entry)
			g.matches++
		}
		if !more {
			return nil
		}
		data = rest
	}
}

// snippet returns the first n characters of line as valid UTF-8 (each
// invalid byte becomes U+FFFD).
func snippet(line []byte, n int) string {
	var b strings.Builder
	for i := 0; i < n && len(line) > 0; i++ {
		r, w := utf8.DecodeRune(line)
		b.WriteRune(r)
		line = line[w:]
	}
	return b.String()
}
