package piextension_test

import (
	"fmt"
	"os"
	"path/filepath"

	"example.com/pifleet/piextension"
)

// Write installs the extension into a directory pi loads extensions from
// (pifleet-server pi-extension --install does this for ~/.pi/agent/extensions).
func ExampleWrite() {
	dir, _ := os.MkdirTemp("", "pi-extensions")
	defer os.RemoveAll(dir)
	path, err := piextension.Write(dir)
	if err != nil {
		panic(err)
	}
	b, _ := os.ReadFile(path)
	fmt.Println(filepath.Base(path), len(b) == len(piextension.Source))
	// Output: pifleet.ts true
}
