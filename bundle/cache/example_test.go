package cache_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"example.com/pifleet/bundle"
	"example.com/pifleet/bundle/cache"
	"example.com/pifleet/bundle/registry"
)

func ExampleCache_Sync() {
	work, _ := os.MkdirTemp("", "cache-example-")
	defer os.RemoveAll(work)
	src := filepath.Join(work, "src")
	os.MkdirAll(filepath.Join(src, "extensions"), 0o755)
	os.WriteFile(filepath.Join(src, "extensions", "hello.ts"), []byte("export default () => {}\n"), 0o644)
	os.WriteFile(filepath.Join(src, "bundle.json"), []byte(`{"extensions":["extensions/hello.ts"],"platforms":["linux","darwin","win32"]}`), 0o644)
	if _, err := registry.Publish(filepath.Join(work, "registry"), "default", src, registry.PublishOptions{}); err != nil {
		fmt.Println(err)
		return
	}

	c, err := cache.Open(filepath.Join(work, "cache"))
	if err != nil {
		fmt.Println(err)
		return
	}
	reg, _ := registry.Open(filepath.Join(work, "registry")) // or an http:// URL
	for range 2 {
		res, err := c.Sync(context.Background(), reg, "default", cache.SyncOptions{})
		if err != nil {
			fmt.Println(err)
			return
		}
		rel, _ := filepath.Rel(res.Dir, res.Resources.Extensions[0])
		fmt.Println(res.Status, "hit:", res.CacheHit, "fetched:", len(res.Fetched), "extension:", filepath.ToSlash(rel),
			"runs here:", res.Manifest.CheckPlatform(bundle.HostPlatform()) == nil)
	}
	// Output:
	// ready hit: false fetched: 1 extension: extensions/hello.ts runs here: true
	// ready hit: true fetched: 0 extension: extensions/hello.ts runs here: true
}
