package cache_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"testing"

	"go.uber.org/goleak"

	"example.com/pifleet/bundle/cache"
	"example.com/pifleet/bundle/registry"
	"example.com/pifleet/internal/fsmkit/fsmtest"
)

// childEnv selects what a re-executed test binary does instead of running
// tests: "sync" (one sync, used by the crash test) or "registry" (serve a
// registry root, used by the benchmarks to keep the server in another
// process).
const childEnv = "PIFLEET_CACHE_TEST_CHILD"

func TestMain(m *testing.M) {
	switch os.Getenv(childEnv) {
	case "sync":
		os.Exit(childSync())
	case "registry":
		os.Exit(childRegistry())
	}
	trace := fsmtest.StartTrace(fsmtest.Checks{Cover: []fsmtest.Coverage{fsmtest.Cover(cache.SyncTable)}})
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) { os.Exit(trace.Check(code)) }))
}

// childSync syncs $CHILD_BUNDLE from $CHILD_REGISTRY into $CHILD_CACHE,
// printing one line per progress report, then "done".
func childSync() int {
	c, err := cache.Open(os.Getenv("CHILD_CACHE"))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	reg, err := registry.Open(os.Getenv("CHILD_REGISTRY"))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	_, err = c.Sync(context.Background(), reg, os.Getenv("CHILD_BUNDLE"), cache.SyncOptions{
		Progress: func(p cache.Progress) { fmt.Printf("%s %d %d\n", p.State, p.Fetched, p.Reused) },
	})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("done")
	return 0
}

// childRegistry serves the registry at $CHILD_ROOT on a loopback port,
// prints its URL, and stops when its standard input closes.
func childRegistry() int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	srv := &http.Server{Handler: registry.NewServer(os.Getenv("CHILD_ROOT"))}
	go srv.Serve(ln)
	fmt.Printf("http://%s\n", ln.Addr())
	bufio.NewReader(os.Stdin).ReadString('\n') // the parent closes stdin, or dies
	srv.Close()
	return 0
}
