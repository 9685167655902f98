package registry_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"

	"example.com/pifleet/bundle/registry"
)

func Example() {
	work, _ := os.MkdirTemp("", "registry-example-")
	defer os.RemoveAll(work)
	src := filepath.Join(work, "src")
	os.MkdirAll(src, 0o755)
	os.WriteFile(filepath.Join(src, "README.md"), []byte("hello\n"), 0o644)

	root := filepath.Join(work, "registry")
	m, err := registry.Publish(root, "default", src, registry.PublishOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := httptest.NewServer(registry.NewServer(root))
	defer srv.Close()

	client, _ := registry.Open(srv.URL)
	served, err := client.Manifest(context.Background(), "default")
	fmt.Println(err, served.BundleHash == m.BundleHash, len(served.Files))
	entries, _ := registry.List(root)
	fmt.Println(entries[0].Name, entries[0].Files, entries[0].Bytes)
	// Output:
	// <nil> true 1
	// default 1 6
}
