package pathsafe_test

import (
	"errors"
	"fmt"
	"path/filepath"

	"example.com/pifleet/bundle/pathsafe"
)

func ExampleCheckSet() {
	err := pathsafe.CheckSet([]string{"skills/review/SKILL.md", "../escape.txt", "src/Foo.ts", "src/foo.ts"})
	var set *pathsafe.SetError
	if errors.As(err, &set) {
		for _, e := range set.Errors {
			fmt.Println(e)
		}
	}
	// Output:
	// unsafe path "../escape.txt" (traversal in segment "..")
	// unsafe path "src/foo.ts" (case_collision): same file as "src/Foo.ts" when case is ignored
}

func ExampleJoin() {
	native, err := pathsafe.Join("/cache/bundle", "skills/greet/SKILL.md")
	fmt.Println(filepath.ToSlash(native), err)
	_, err = pathsafe.Join("/cache/bundle", "C:/windows")
	fmt.Println(err)
	// Output:
	// /cache/bundle/skills/greet/SKILL.md <nil>
	// unsafe path "C:/windows" (drive_letter)
}
