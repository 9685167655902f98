package filehash

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// sum reads path with raw system calls: os.Open would also try (and fail)
// to register a regular file with the network poller, and update its access
// time, which together cost as much as hashing 4 KiB.
func sum(path string, h hashWriter, buf []byte) (int64, error) {
	return sumAt(unix.AT_FDCWD, path, h, buf)
}

func sumAt(dirfd int, path string, h hashWriter, buf []byte) (int64, error) {
	const flags = unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_NONBLOCK
	fd, err := openat(dirfd, path, flags|unix.O_NOATIME)
	if errors.Is(err, unix.EPERM) {
		// O_NOATIME is only allowed to the file's owner.
		fd, err = openat(dirfd, path, flags)
	}
	if err != nil {
		return 0, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	var total int64
	for {
		n, err := unix.Read(fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return 0, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return total, nil
		}
		h.Write(buf[:n])
		total += int64(n)
	}
}

func open(path string, flags int) (int, error) {
	return openat(unix.AT_FDCWD, path, flags)
}

func openat(dirfd int, path string, flags int) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, path, flags, 0)
		if !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}

// sumBatch hashes files of one directory, opened relative to it.
func sumBatch(dir string, names []string, out []Result, buf []byte) error {
	dirfd, err := open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
	if err != nil {
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(dirfd)
	h := sha256.New()
	for i, n := range names {
		h.Reset()
		size, err := sumAt(dirfd, n, h, buf)
		if err != nil {
			return fmt.Errorf("hashing %s: %w", filepath.Join(dir, n), err)
		}
		var d [sha256.Size]byte
		out[i] = Result{SHA256: hex.EncodeToString(h.Sum(d[:0])), Bytes: size}
	}
	return nil
}
