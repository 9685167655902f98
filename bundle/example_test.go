package bundle_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"example.com/pifleet/bundle"
)

func ExampleHash() {
	files := []bundle.File{
		{Path: "Ａ.txt", SHA256: sum("y")},
		{Path: "😀.txt", SHA256: sum("x")}, // sorts first: JavaScript compares UTF-16 code units
	}
	fmt.Println(bundle.Hash(files))
	// Output: dd08b3cc4c19eb22f9d988576ffcbfda8fb048d36a54f74396da897313b4b382
}

func ExampleBuildDir() {
	dir, _ := os.MkdirTemp("", "bundle-example-")
	defer os.RemoveAll(dir)
	os.MkdirAll(filepath.Join(dir, "skills", "greet"), 0o755)
	os.WriteFile(filepath.Join(dir, "README.md"), []byte("hello\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "skills", "greet", "SKILL.md"), []byte("# greet\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "bundle.json"), []byte(`{"skills":["skills"],"tools":{"active":["read","grep"]}}`), 0o644)

	m, err := bundle.BuildDir(dir, "default", bundle.BuildOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(string(m.Encode()))
	// Output:
	// {
	// 	"v": 1,
	// 	"name": "default",
	// 	"skills": [
	// 		"skills"
	// 	],
	// 	"tools": {
	// 		"active": [
	// 			"read",
	// 			"grep"
	// 		]
	// 	},
	// 	"bundleHash": "6b737a729b00828a74a72d6bb93216100de9dcc3acf9391a2c5902ac485184dc",
	// 	"files": [
	// 		{
	// 			"path": "README.md",
	// 			"sha256": "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03",
	// 			"bytes": 6
	// 		},
	// 		{
	// 			"path": "skills/greet/SKILL.md",
	// 			"sha256": "e032e857a2a53d3eadfc4564121320e04ab421b17628d2508f07ed5ce39155db",
	// 			"bytes": 8
	// 		}
	// 	]
	// }
}

func ExampleParseManifest() {
	_, err := bundle.ParseManifest([]byte(`{"v":2,"name":"x","bundleHash":"nope","files":[]}`))
	var me *bundle.ManifestError
	if errors.As(err, &me) {
		for _, p := range me.Problems {
			fmt.Println(p.Field+":", p.Reason)
		}
	}
	fmt.Println(errors.Is(err, bundle.CodeInvalidManifest))
	// Output:
	// v: must be 1
	// bundleHash: must be 64 lowercase hex digits
	// true
}
