package filehash

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sum reads path with raw system calls: os.Open would also try (and fail)
// to register a regular file with the network poller, and update its access
// time, which together cost as much as hashing 4 KiB.
func sum(path string, buf []byte) (digest, int64, error) {
	var name []byte
	return sumAt(unix.AT_FDCWD, path, buf, &name)
}

// sumAt hashes the file at path relative to dirfd. A file smaller than buf
// costs three system calls (open, one read, close) and no allocation: on
// Linux a read from a regular file returns fewer bytes than asked only at
// the end of the file, so a short read is the end and needs no second read
// to see 0 bytes.
func sumAt(dirfd int, path string, buf []byte, name *[]byte) (digest, int64, error) {
	const flags = unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_NONBLOCK
	fd, err := openatName(dirfd, path, flags|unix.O_NOATIME, name)
	if errors.Is(err, unix.EPERM) {
		// O_NOATIME is only allowed to the file's owner.
		fd, err = openatName(dirfd, path, flags, name)
	}
	if err != nil {
		return digest{}, 0, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer unix.Close(fd)
	n, err := read(fd, buf)
	if err != nil {
		return digest{}, 0, &os.PathError{Op: "read", Path: path, Err: err}
	}
	if n < len(buf) {
		return sha256.Sum256(buf[:n]), int64(n), nil
	}
	// A large file: hash the rest in place through a mapping when it is
	// big enough for that to pay (no copy into buf), else stream it.
	h := sha256.New()
	h.Write(buf[:n])
	total := int64(n)
	if m, err := hashMapped(fd, h, total); err != nil {
		return digest{}, 0, &os.PathError{Op: "read", Path: path, Err: err}
	} else if m > 0 {
		total += m
	}
	if n, err = preadFull(fd, buf, total); err != nil {
		return digest{}, 0, &os.PathError{Op: "read", Path: path, Err: err}
	}
	for n > 0 {
		h.Write(buf[:n])
		total += int64(n)
		if n, err = preadFull(fd, buf, total); err != nil {
			return digest{}, 0, &os.PathError{Op: "read", Path: path, Err: err}
		}
	}
	var d digest
	h.Sum(d[:0])
	return d, total, nil
}

// mapThreshold is the size from which the part of a file after its first
// buffer is hashed through a mapping: copying it through buf costs about
// a tenth of hashing it, mapping a few hundred pages much less.
const mapThreshold = 1 << 20

// hashMapped hashes the bytes of fd from off to its end through a
// read-only mapping and returns how many it hashed (0 when the file is too
// small for a mapping to pay, or cannot be mapped: the caller reads on).
// A file truncated meanwhile faults the mapping: that is an error, not a
// crash.
func hashMapped(fd int, h hash.Hash, off int64) (n int64, err error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Size-off < mapThreshold {
		return 0, nil
	}
	data, err := unix.Mmap(fd, off, int(st.Size-off), unix.PROT_READ, unix.MAP_SHARED|unix.MAP_POPULATE)
	if err != nil {
		return 0, nil
	}
	defer unix.Munmap(data)
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			n, err = 0, fmt.Errorf("file changed while it was hashed: %v", r)
		}
	}()
	h.Write(data)
	return int64(len(data)), nil
}

// preadFull reads into buf at off: what read would return, without moving
// the file offset.
func preadFull(fd int, buf []byte, off int64) (int, error) {
	for {
		n, err := unix.Pread(fd, buf, off)
		if !errors.Is(err, unix.EINTR) {
			return n, err
		}
	}
}

func read(fd int, buf []byte) (int, error) {
	for {
		n, err := unix.Read(fd, buf)
		if !errors.Is(err, unix.EINTR) {
			return n, err
		}
	}
}

// openatName is openat with the NUL-terminated path built in *name, a
// buffer reused from file to file: unix.Openat would allocate a copy of
// every path.
func openatName(dirfd int, path string, flags int, name *[]byte) (int, error) {
	if strings.IndexByte(path, 0) >= 0 {
		return -1, unix.EINVAL
	}
	b := append(append((*name)[:0], path...), 0)
	*name = b
	for {
		fd, _, errno := unix.Syscall6(unix.SYS_OPENAT, uintptr(dirfd), uintptr(unsafe.Pointer(&b[0])), uintptr(flags), 0, 0, 0)
		switch errno {
		case 0:
			return int(fd), nil
		case unix.EINTR:
		default:
			return -1, errno
		}
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

// sumBatch hashes files of one directory, opened relative to it, into
// sums.
func sumBatch(dir string, names []string, sums []digest, sizes []int64, buf []byte) error {
	dirfd, err := open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
	if err != nil {
		return &os.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(dirfd)
	var name []byte
	for i, n := range names {
		sums[i], sizes[i], err = sumAt(dirfd, n, buf, &name)
		if err != nil {
			return fmt.Errorf("hashing %s: %w", filepath.Join(dir, n), err)
		}
	}
	return nil
}
