package cache

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSpreadVersionsMarksTheRoot checks that the root gets FS_TOPDIR_FL
// where the file system has directory attributes (ext4), and that a second
// call leaves it alone.
func TestSpreadVersionsMarksTheRoot(t *testing.T) {
	root := t.TempDir()
	err := spreadVersions(root)
	if errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EPERM) {
		t.Skipf("no directory attributes under %s: %v", root, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	flags, err := unix.IoctlGetUint32(fd, unix.FS_IOC_GETFLAGS)
	if err != nil {
		t.Fatal(err)
	}
	if flags&0x00020000 == 0 {
		t.Errorf("flags %#x: FS_TOPDIR_FL not set", flags)
	}
	if err := spreadVersions(root); err != nil {
		t.Errorf("second call: %v", err)
	}
}
