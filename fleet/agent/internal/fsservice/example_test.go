package fsservice_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"example.com/pifleet/fleet/agent/internal/fsservice"
	"example.com/pifleet/transport"
)

// A Service answers one instance's file requests from its cwd.
func Example() {
	cwd, err := os.MkdirTemp("", "fsservice-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(cwd)
	if err := os.WriteFile(filepath.Join(cwd, "notes.txt"), []byte("one\ntwo\nthree\n"), 0o644); err != nil {
		panic(err)
	}

	svc := fsservice.New(cwd)
	ctx := context.Background()

	page := svc.Read(ctx, &transport.FsReadFrame{Path: "notes.txt", Offset: ptr(1), Limit: ptr(1)})
	fmt.Printf("read: %q truncated=%v\n", *page.Text, page.Truncated)

	hits := svc.Grep(ctx, &transport.FsGrepFrame{Pattern: "^t", Glob: "**/*.txt"})
	fmt.Printf("grep:\n%s\n", *hits.Text)

	escape := svc.Read(ctx, &transport.FsReadFrame{Path: "../etc/passwd"})
	fmt.Println("escape:", fsservice.ResultError(escape) != nil, escape.Error.Code)
	// Output:
	// read: "two" truncated=true
	// grep:
	// notes.txt:2:two
	// notes.txt:3:three
	// escape: true path_escape
}

func ptr(v float64) *float64 { return &v }
