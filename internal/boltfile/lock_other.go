//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package boltfile

import (
	"os"
	"time"
)

// lock does nothing here: bbolt locks the file itself when it opens it,
// after the checks.
func lock(*os.File, time.Duration) error { return nil }
