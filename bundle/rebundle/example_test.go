package rebundle_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"example.com/pifleet/bundle/cache"
	"example.com/pifleet/bundle/rebundle"
	"example.com/pifleet/bundle/registry"
)

// An agent switches a worker from bundle "a" to bundle "b": sync b, then
// restart pi on the same session with b's resources.
func ExampleSwitch() {
	work, _ := os.MkdirTemp("", "rebundle-example-")
	defer os.RemoveAll(work)
	src := filepath.Join(work, "src")
	os.MkdirAll(filepath.Join(src, "skills", "review"), 0o755)
	os.WriteFile(filepath.Join(src, "skills", "review", "SKILL.md"), []byte("# review\n"), 0o644)
	os.WriteFile(filepath.Join(src, "bundle.json"), []byte(`{"skills":["skills"]}`), 0o644)
	if _, err := registry.Publish(filepath.Join(work, "registry"), "b", src, registry.PublishOptions{}); err != nil {
		fmt.Println(err)
		return
	}
	c, _ := cache.Open(filepath.Join(work, "cache"))
	reg := registry.NewDir(filepath.Join(work, "registry"))

	sync := func(ctx context.Context, name string) (*cache.Result, error) {
		return c.Sync(ctx, reg, name, cache.SyncOptions{}) // no pin: /fleet-use drops it
	}
	restart := func(ctx context.Context, to *cache.Result) error {
		// The agent stops pi and starts it again on the same session file,
		// with --skill for each of to.Resources.Skills, and so on.
		fmt.Println("restart with", len(to.Resources.Skills), "skill directory")
		return nil
	}
	out, err := rebundle.Switch(context.Background(), rebundle.Bundle{Name: "a"}, "b", sync, restart, rebundle.Options{})
	fmt.Println(out.Switched, out.Running.Name, out.Trail, err)

	_, err = rebundle.Switch(context.Background(), out.Running, "nope", sync, restart, rebundle.Options{})
	fmt.Println(err != nil)
	// Output:
	// restart with 1 skill directory
	// true b [running_old syncing reloading running_new] <nil>
	// true
}
