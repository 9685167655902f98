//go:build !unix

package shim

import (
	"context"
	"fmt"
	"os"
)

// Serve is not available on this platform.
func Serve(ctx context.Context, cfg Config) error { return ErrUnsupported }

// Main is not available on this platform.
func Main(args []string) int {
	fmt.Fprintln(os.Stderr, ErrUnsupported)
	return 2
}

// Start is not available on this platform.
func Start(ctx context.Context, cfg StartConfig) (*Client, error) { return nil, ErrUnsupported }
