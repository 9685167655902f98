//go:build !linux

package e2ekit

import (
	"context"
	"errors"
)

// endShimProcesses finds shims by their open files, which only Linux
// shows (/proc): elsewhere a shim without a handle is not found.
func endShimProcesses(context.Context, string, map[int]bool) ([]Leftover, error) {
	return nil, nil
}

// WorkerProcesses needs the process tree of /proc, which only Linux has.
func WorkerProcesses(stateDir, instanceID string) (shimPID, workerPID int, err error) {
	return 0, 0, errors.New("e2ekit: WorkerProcesses needs Linux's /proc")
}

// Shims needs the process tree of /proc, which only Linux has.
func Shims(stateDir string) (map[string]int, error) {
	return nil, errors.New("e2ekit: Shims needs Linux's /proc")
}
