package cache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"example.com/pifleet/bundle"
	"example.com/pifleet/bundle/internal/filehash"
)

// fileMode is the mode of cached files: read-only, because versions share
// unchanged files through hard links.
const fileMode = 0o444

// outcome is what a worker reports for one job.
type outcome struct {
	job     *job
	fetched bool // downloaded (else reused from the previous version)
	err     error
}

// fetchAll runs the jobs on opts.Concurrency workers. The first failure
// cancels the rest.
func (r *run) fetchAll() SyncEvent {
	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	results := make(chan outcome, len(r.jobs))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(r.opts.Concurrency, len(r.jobs)) {
		wg.Go(func() {
			buf := make([]byte, filehash.BufferSize)
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= len(r.jobs) {
					return
				}
				results <- r.do(ctx, &r.jobs[i], buf)
			}
		})
	}
	go func() {
		wg.Wait()
		close(results)
	}()
	for o := range results {
		if o.err != nil {
			if r.err == nil {
				code := bundle.CodeFetchFailed
				var mismatch *mismatchError
				if errors.As(o.err, &mismatch) {
					code = bundle.CodeHashMismatch
				}
				r.fail(code, o.job.file.Path, o.err)
				cancel()
			}
			continue
		}
		f := o.job.file
		if o.fetched {
			r.res.Fetched = append(r.res.Fetched, f.Path)
			r.res.FetchedBytes += f.Bytes
			r.progress.Fetched++
			r.progress.FetchedBytes += f.Bytes
		} else {
			r.res.Reused = append(r.res.Reused, f.Path)
			r.res.ReusedBytes += f.Bytes
			r.progress.Reused++
			r.progress.ReusedBytes += f.Bytes
		}
		r.report()
	}
	if r.err != nil {
		return EventFailed
	}
	if err := r.ctx.Err(); err != nil {
		r.fail(bundle.CodeFetchFailed, "", err)
		return EventFailed
	}
	return EventFilesStaged
}

// do puts one file in place: from the previous version when its copy
// there is intact, else from the registry.
func (r *run) do(ctx context.Context, j *job, buf []byte) outcome {
	if j.base != "" {
		err := reuse(j, buf)
		if err == nil {
			return outcome{job: j}
		}
		r.log.Warn().Err(err).Str("path", j.file.Path).Msg("previous version's copy unusable; fetching")
	}
	return outcome{job: j, fetched: true, err: r.fetch(ctx, j, buf)}
}

// reuse links the previous version's copy of the file into the new
// version (the versions then share it, read-only), or copies it where links
// are not possible. The copy was verified when it was fetched; its size is
// checked again, and a copy made here is re-verified by SHA-256. Damage to
// the content of a cached version is what Verify finds.
func reuse(j *job, buf []byte) error {
	fi, err := os.Lstat(j.base)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s: not a regular file", j.base)
	}
	if fi.Size() != j.file.Bytes {
		return &mismatchError{path: j.file.Path, size: fi.Size(), wantSize: j.file.Bytes}
	}
	if err := os.Link(j.base, j.dst); err == nil {
		return nil
	}
	in, err := os.Open(j.base)
	if err != nil {
		return err
	}
	defer in.Close()
	return writeVerified(j, in, buf)
}

// fetch downloads one file, trying opts.Attempts times.
func (r *run) fetch(ctx context.Context, j *job, buf []byte) error {
	var err error
	for attempt := range r.opts.Attempts {
		if attempt > 0 {
			if werr := pause(ctx, r.opts.Backoff.ForAttempt(float64(attempt-1))); werr != nil {
				return werr
			}
			r.log.Debug().Err(err).Str("path", j.file.Path).Int("attempt", attempt+1).Msg("retrying fetch")
		}
		if err = r.fetchOnce(ctx, j, buf); err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	return fmt.Errorf("%d attempts: %w", r.opts.Attempts, err)
}

func (r *run) fetchOnce(ctx context.Context, j *job, buf []byte) error {
	rc, err := r.reg.Open(ctx, r.name, j.file)
	if err != nil {
		return err
	}
	defer rc.Close()
	return writeVerified(j, rc, buf)
}

// writeVerified writes src to the job's destination, which must not exist,
// and checks its size and hash; a file that does not match is removed (so
// the next attempt starts clean). A file smaller than buf, the usual case,
// is read and checked whole before its destination is created: one write
// system call, and nothing created for a bad download.
func writeVerified(j *job, src io.Reader, buf []byte) error {
	if j.file.Bytes >= int64(len(buf)) {
		return streamVerified(j, src, buf)
	}
	// Read one byte more than announced, to notice a longer body.
	n, err := readUpTo(src, buf[:j.file.Bytes+1])
	if err != nil {
		return err
	}
	if err := checkContent(j, buf[:n]); err != nil {
		return err
	}
	out, err := os.OpenFile(j.dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fileMode)
	if err != nil {
		return err
	}
	_, err = out.Write(buf[:n])
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(j.dst)
	}
	return err
}

// readUpTo reads src into buf until the end of src or of buf.
func readUpTo(src io.Reader, buf []byte) (int, error) {
	n := 0
	for n < len(buf) {
		m, err := src.Read(buf[n:])
		n += m
		if err == io.EOF {
			break
		}
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// checkContent checks that data is the job's file.
func checkContent(j *job, data []byte) error {
	sum := sha256.Sum256(data)
	var got [2 * sha256.Size]byte
	hex.Encode(got[:], sum[:])
	if int64(len(data)) != j.file.Bytes || string(got[:]) != j.file.SHA256 {
		return &mismatchError{path: j.file.Path, want: j.file.SHA256, got: string(got[:]), size: int64(len(data)), wantSize: j.file.Bytes}
	}
	return nil
}

// streamVerified is writeVerified for a file larger than buf: written as
// it arrives, hashed on the way, removed when it does not match.
func streamVerified(j *job, src io.Reader, buf []byte) error {
	out, err := os.OpenFile(j.dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fileMode)
	if err != nil {
		return err
	}
	h := sha256.New()
	// Read one byte more than announced, to notice a longer body.
	n, err := io.CopyBuffer(io.MultiWriter(out, h), io.LimitReader(src, j.file.Bytes+1), buf)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		if got := hex.EncodeToString(h.Sum(nil)); n != j.file.Bytes || got != j.file.SHA256 {
			err = &mismatchError{path: j.file.Path, want: j.file.SHA256, got: got, size: n, wantSize: j.file.Bytes}
		}
	}
	if err != nil {
		os.Remove(j.dst)
	}
	return err
}

func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// mismatchError reports content that is not what the manifest says.
type mismatchError struct {
	path, want, got string
	size, wantSize  int64
}

func (e *mismatchError) Error() string {
	if e.size != e.wantSize {
		return fmt.Sprintf("%s: got %d bytes, the manifest says %d", e.path, e.size, e.wantSize)
	}
	return fmt.Sprintf("%s: content hashes to %s, the manifest says %s", e.path, e.got, e.want)
}

// Is makes errors.Is(err, bundle.CodeHashMismatch) true.
func (e *mismatchError) Is(target error) bool { return target == bundle.CodeHashMismatch }
