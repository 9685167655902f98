package fsservice

import (
	"context"
	"errors"
	"fmt"

	"github.com/rs/zerolog"

	"example.com/pifleet/transport"
)

// Limits of reference 1.16 and 1.24.
const (
	// MaxPageLines is the most lines one fs_read text page holds.
	MaxPageLines = 2000
	// MaxPageBytes caps a text page, a grep line budget and a git output.
	MaxPageBytes = 51_200
	// MaxImageBytes is the largest image fs_read returns (700 KiB).
	MaxImageBytes = 716_800
	// GrepMaxMatches is how many matching lines fs_grep returns at most.
	GrepMaxMatches = 200
	// GrepMaxLineChars is how much of a matching line fs_grep shows.
	GrepMaxLineChars = 300
	// GrepMaxFileBytes: fs_grep skips larger files (1 MiB).
	GrepMaxFileBytes = 1 << 20
	// MaxGrepBytes caps a whole fs_grep answer, so that 200 long paths
	// cannot push the frame past transport.MaxFrameBytes. A pifleet
	// addition.
	MaxGrepBytes = 512 << 10
	// DefaultReadLimit is how many bytes of one file an fs_read may read
	// at most, skipped lines included (see WithReadLimit).
	DefaultReadLimit = 64 << 20
)

// Access says whether the file service answers at all.
type Access string

// Access modes.
const (
	// AccessWorkspace (the default) serves the instance's cwd.
	AccessWorkspace Access = "workspace"
	// AccessOff answers every request with CodeDisabled.
	AccessOff Access = "off"
)

// ErrBadAccess reports an access mode ParseAccess does not know.
var ErrBadAccess = errors.New("fsservice: unknown access mode")

// ParseAccess turns a configuration value into an Access; "" means the
// default, AccessWorkspace.
func ParseAccess(s string) (Access, error) {
	switch Access(s) {
	case "", AccessWorkspace:
		return AccessWorkspace, nil
	case AccessOff:
		return AccessOff, nil
	}
	return "", fmt.Errorf("%w %q (want %q or %q)", ErrBadAccess, s, AccessWorkspace, AccessOff)
}

// Service answers file-service requests for one instance, rooted at its
// cwd. It holds no open files between requests and is safe for concurrent
// use; creating one touches nothing on disk.
type Service struct {
	root      string
	access    Access
	git       string
	readLimit int64
	log       zerolog.Logger
}

// Option configures a Service.
type Option func(*Service)

// WithAccess sets the access mode (default AccessWorkspace). A mode other
// than AccessWorkspace and AccessOff is treated as off: deny by default.
func WithAccess(a Access) Option { return func(s *Service) { s.access = a } }

// WithGit sets the git executable fs_diff runs (default "git", looked up in
// PATH).
func WithGit(path string) Option { return func(s *Service) { s.git = path } }

// WithReadLimit caps how many bytes one fs_read may read from a file,
// including the lines it skips to reach the offset (default
// DefaultReadLimit). A page that cannot be reached within the limit is
// answered too_large.
func WithReadLimit(n int64) Option { return func(s *Service) { s.readLimit = n } }

// WithLogger sets the logger (default zerolog.Nop()).
func WithLogger(l zerolog.Logger) Option { return func(s *Service) { s.log = l } }

// New returns a Service rooted at root, the instance's cwd as given at
// spawn. The root need not exist yet: it is resolved on every request.
func New(root string, opts ...Option) *Service {
	s := &Service{
		root:      root,
		access:    AccessWorkspace,
		git:       "git",
		readLimit: DefaultReadLimit,
		log:       zerolog.Nop(),
	}
	for _, o := range opts {
		o(s)
	}
	if s.readLimit <= 0 {
		s.readLimit = DefaultReadLimit
	}
	return s
}

// Root returns the root the Service was created with.
func (s *Service) Root() string { return s.root }

// Handle answers one fs_read, fs_list, fs_grep or fs_diff frame. It
// reports false for any other frame type (and then returns nil).
func (s *Service) Handle(ctx context.Context, req transport.Frame) (*transport.FsResultFrame, bool) {
	switch f := req.(type) {
	case *transport.FsReadFrame:
		return s.Read(ctx, f), true
	case *transport.FsListFrame:
		return s.List(ctx, f), true
	case *transport.FsGrepFrame:
		return s.Grep(ctx, f), true
	case *transport.FsDiffFrame:
		return s.Diff(ctx, f), true
	}
	return nil, false
}

// Read answers fs_read: a text page, or an image as base64.
func (s *Service) Read(ctx context.Context, req *transport.FsReadFrame) *transport.FsResultFrame {
	return s.answer(ctx, req, func(res *transport.FsResultFrame) error {
		return s.read(ctx, req, res)
	})
}

// List answers fs_list: the entries of a directory.
func (s *Service) List(ctx context.Context, req *transport.FsListFrame) *transport.FsResultFrame {
	return s.answer(ctx, req, func(res *transport.FsResultFrame) error {
		return s.list(req.Path, res)
	})
}

// Grep answers fs_grep: matching lines under the root.
func (s *Service) Grep(ctx context.Context, req *transport.FsGrepFrame) *transport.FsResultFrame {
	return s.answer(ctx, req, func(res *transport.FsResultFrame) error {
		return s.grep(ctx, req, res)
	})
}

// Diff answers fs_diff: git diff, or git rev-parse HEAD, in the root.
func (s *Service) Diff(ctx context.Context, req *transport.FsDiffFrame) *transport.FsResultFrame {
	return s.answer(ctx, req, func(res *transport.FsResultFrame) error {
		return s.diff(ctx, req, res)
	})
}

// answer runs one request and turns its error into the result's error
// field; a result never carries both data and an error.
func (s *Service) answer(ctx context.Context, req transport.Frame, run func(*transport.FsResultFrame) error) *transport.FsResultFrame {
	if s.access != AccessWorkspace {
		return ErrorResult(req, errorf(CodeDisabled, "file service is disabled on this agent (access %q)", s.access))
	}
	res := newResult(req)
	if err := run(res); err != nil {
		if ctx.Err() != nil && !errors.As(err, new(*Error)) {
			err = errorf(CodeCanceled, "%s request canceled: %v", req.FrameType(), ctx.Err())
		}
		out := ErrorResult(req, err)
		s.log.Debug().Str("type", req.FrameType()).Str("root", s.root).Err(err).Msg("fs request failed")
		return out
	}
	return res
}
