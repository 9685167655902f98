package bundle_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/google/go-cmp/cmp"

	"example.com/pifleet/bundle"
	"example.com/pifleet/bundle/pathsafe"
)

func sum(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// writeTree creates files (POSIX path → content) under a new directory.
func writeTree(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// The three test vectors of reference 1.20, computed by the TypeScript code.
func TestHashVectors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []bundle.File
		want  string
	}{
		{"empty", nil, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"a and b", []bundle.File{{Path: "b.txt", SHA256: sum("b")}, {Path: "a.txt", SHA256: sum("a")}},
			"b0df8812401db782b5bc6761f6c90748221e08f2c28dd1668086c9c569b0900c"},
		{"UTF-16 order", []bundle.File{{Path: "Ａ.txt", SHA256: sum("y")}, {Path: "😀.txt", SHA256: sum("x")}},
			"dd08b3cc4c19eb22f9d988576ffcbfda8fb048d36a54f74396da897313b4b382"},
	} {
		if got := bundle.Hash(tc.files); got != tc.want {
			t.Errorf("%s: Hash = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestHashIgnoresOrderAndSizesButNotContent(t *testing.T) {
	a := []bundle.File{{Path: "a.txt", SHA256: sum("a"), Bytes: 1}, {Path: "b.txt", SHA256: sum("b"), Bytes: 1}}
	b := []bundle.File{{Path: "b.txt", SHA256: sum("b"), Bytes: 99}, {Path: "a.txt", SHA256: sum("a")}}
	if bundle.Hash(a) != bundle.Hash(b) {
		t.Error("Hash depends on order or sizes")
	}
	if a[0].Path != "a.txt" {
		t.Error("Hash reordered its argument")
	}
	changed := []bundle.File{{Path: "a.txt", SHA256: sum("A")}, {Path: "b.txt", SHA256: sum("b")}}
	if bundle.Hash(a) == bundle.Hash(changed) {
		t.Error("Hash did not change with content")
	}
}

func TestCompareUTF16(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"a", "b", -1}, {"b", "a", 1}, {"a", "a", 0}, {"a", "ab", -1}, {"", "a", -1},
		{"😀", "Ａ", -1}, // surrogate pair (U+D83D…) before U+FF21
		{"\uE000", "😀", 1},
		{"\uD7FF", "😀", -1},
		{"😀", "😁", -1},
		{"x😀y", "xＡ", -1},
		{"é", "z", 1},
	} {
		if got := bundle.CompareUTF16(tc.a, tc.b); got != tc.want {
			t.Errorf("CompareUTF16(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}

func FuzzCompareUTF16(f *testing.F) {
	f.Add("😀", "Ａ")
	f.Add("abc", "abd")
	f.Fuzz(func(t *testing.T, a, b string) {
		if !validUTF8(a) || !validUTF8(b) {
			return
		}
		want := compareUnits(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
		if got := bundle.CompareUTF16(a, b); got != want {
			t.Fatalf("CompareUTF16(%q, %q) = %d, want %d", a, b, got, want)
		}
	})
}

func validUTF8(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

func compareUnits(a, b []uint16) int {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			if a[i] < b[i] {
				return -1
			}
			return 1
		}
	}
	switch {
	case len(a) < len(b):
		return -1
	case len(a) > len(b):
		return 1
	}
	return 0
}

func TestBuildIsDeterministicAndWalksRegularFilesOnly(t *testing.T) {
	dir := writeTree(t, map[string]string{
		"z.txt":             "z",
		"a/deep/nested.txt": "n",
		"a/first.txt":       "f",
		"bundle.json":       `{"skills":["a"]}`,
		"sub/bundle.json":   "not metadata here",
	})
	outside := writeTree(t, map[string]string{"secret.txt": "s"})
	if err := os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(dir, "link.txt")); err != nil {
		t.Skipf("no symlinks: %v", err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "linkdir")); err != nil {
		t.Fatal(err)
	}
	first, err := bundle.BuildDir(dir, "default", bundle.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	second, err := bundle.BuildDir(dir, "default", bundle.BuildOptions{Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	if string(first.Encode()) != string(second.Encode()) {
		t.Error("two builds of one directory differ")
	}
	var paths []string
	for _, f := range first.Files {
		paths = append(paths, f.Path)
	}
	if d := cmp.Diff([]string{"a/deep/nested.txt", "a/first.txt", "sub/bundle.json", "z.txt"}, paths); d != "" {
		t.Errorf("paths (-want +got):\n%s", d)
	}
	want := "{\n\t\"v\": 1,\n\t\"name\": \"default\",\n\t\"skills\": [\n\t\t\"a\"\n\t],\n\t\"bundleHash\": \"" + first.BundleHash + "\",\n\t\"files\": [\n" +
		"\t\t{\n\t\t\t\"path\": \"a/deep/nested.txt\",\n\t\t\t\"sha256\": \"" + sum("n") + "\",\n\t\t\t\"bytes\": 1\n\t\t},\n" +
		"\t\t{\n\t\t\t\"path\": \"a/first.txt\",\n\t\t\t\"sha256\": \"" + sum("f") + "\",\n\t\t\t\"bytes\": 1\n\t\t},\n" +
		"\t\t{\n\t\t\t\"path\": \"sub/bundle.json\",\n\t\t\t\"sha256\": \"" + sum("not metadata here") + "\",\n\t\t\t\"bytes\": 17\n\t\t},\n" +
		"\t\t{\n\t\t\t\"path\": \"z.txt\",\n\t\t\t\"sha256\": \"" + sum("z") + "\",\n\t\t\t\"bytes\": 1\n\t\t}\n\t]\n}\n"
	if d := cmp.Diff(strings.Split(want, "\n"), strings.Split(string(first.Encode()), "\n")); d != "" {
		t.Errorf("manifest.json (-want +got):\n%s", d)
	}
	if len(first.BundleHash) != 64 || strings.Trim(first.BundleHash, "0123456789abcdef") != "" {
		t.Errorf("bundleHash %q is not 64 lowercase hex digits", first.BundleHash)
	}
	again, err := bundle.ParseManifest(first.Encode())
	if err != nil {
		t.Fatalf("a built manifest does not parse: %v", err)
	}
	compact, _ := first.MarshalJSON()
	if string(again.Raw) != string(compact) {
		t.Errorf("Raw after a round trip:\n%s\nwant\n%s", again.Raw, compact)
	}
}

func TestBuildRefusesUnsafePaths(t *testing.T) {
	dir := writeTree(t, map[string]string{"ok.txt": "x", "CON.txt": "y", "trailing.": "z"})
	_, err := bundle.Build(dir, "evil", bundle.Metadata{}, bundle.BuildOptions{})
	var up *bundle.UnsafePathsError
	if !errors.As(err, &up) || !errors.Is(err, bundle.CodeUnsafePath) || len(up.Err.Errors) != 2 {
		t.Fatalf("Build = %v, want an UnsafePathsError with both paths", err)
	}
	if _, err := bundle.Build(dir, "../x", bundle.Metadata{}, bundle.BuildOptions{}); !errors.As(err, new(*bundle.NameError)) {
		t.Errorf("Build with a bad name = %v, want a NameError", err)
	}
}

func TestBuildRefusesResourcesThatNameNothing(t *testing.T) {
	dir := writeTree(t, map[string]string{"extensions/hello.ts": "x", "skills/greet/SKILL.md": "y"})
	md := bundle.Metadata{
		Extensions: []string{"extensions/hello.ts", "extensions"},
		Skills:     []string{"skills", "skills/greet", "nope"},
	}
	_, err := bundle.Build(dir, "b", md, bundle.BuildOptions{})
	var me *bundle.MetadataError
	if !errors.As(err, &me) {
		t.Fatalf("Build = %v, want a MetadataError", err)
	}
	var fields []string
	for _, p := range me.Problems {
		fields = append(fields, p.Field)
	}
	if d := cmp.Diff([]string{"extensions[1]", "skills[2]"}, fields); d != "" {
		t.Errorf("problem fields (-want +got):\n%s\n%v", d, err)
	}
}

func validManifestJSON(t testing.TB, files []bundle.File, extra string) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(`{"v":1,"name":"x",` + extra + `"bundleHash":"` + bundle.Hash(files) + `","files":[`)
	for i, f := range files {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(`{"path":"` + f.Path + `","sha256":"` + f.SHA256 + `","bytes":1}`)
	}
	b.WriteString("]}")
	return b.String()
}

func TestParseManifestAcceptsTheFullSchema(t *testing.T) {
	files := []bundle.File{{Path: "a.txt", SHA256: sum("a"), Bytes: 1}}
	text := validManifestJSON(t, files, `"platforms":["linux","darwin"],"tools":{"active":["read","grep"]},`+
		`"model":{"primary":{"provider":"anthropic","id":"claude-sonnet-4-5","thinking":"high"},"fallbacks":[{"provider":"openai","id":"gpt"}],"pin":true},`+
		`"budget":{"maxCost":5,"maxTurns":10},"review":{"maxRejects":2},"ui":{"autoAnswer":{"Proceed?":true,"Name":"bob"}},`+
		`"extensions":["a.txt"],"skills":[],"future":{"kept":[1,2]},`)
	m, err := bundle.ParseManifest([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	yes, five, ten, two := true, 5.0, 10.0, 2.0
	want := bundle.Metadata{
		Platforms:  []string{"linux", "darwin"},
		Extensions: []string{"a.txt"},
		Skills:     []string{},
		Tools:      &bundle.Tools{Active: []string{"read", "grep"}},
		Model: &bundle.ModelPolicy{
			Primary:   bundle.ModelRef{Provider: "anthropic", ID: "claude-sonnet-4-5", Thinking: "high"},
			Fallbacks: []bundle.ModelRef{{Provider: "openai", ID: "gpt"}},
			Pin:       &yes,
		},
		Review: &bundle.Review{MaxRejects: &two},
		Budget: &bundle.Budget{MaxCost: &five, MaxTurns: &ten},
		UI:     &bundle.UI{AutoAnswer: []bundle.AutoAnswer{{Key: "Proceed?", Bool: &yes}, {Key: "Name", Text: "bob"}}},
	}
	if d := cmp.Diff(want, m.Metadata); d != "" {
		t.Errorf("metadata (-want +got):\n%s", d)
	}
	if !strings.Contains(string(m.Raw), `"future":{"kept":[1,2]}`) {
		t.Errorf("Raw lost an unknown property: %s", m.Raw)
	}
	if err := m.CheckPlatform("linux"); err != nil {
		t.Errorf("CheckPlatform(linux) = %v", err)
	}
	var pe *bundle.PlatformError
	if err := m.CheckPlatform("win32"); !errors.As(err, &pe) || pe.Platform != "win32" || !strings.Contains(err.Error(), "linux, darwin") {
		t.Errorf("CheckPlatform(win32) = %v", err)
	}
	for _, pinned := range []string{"", m.BundleHash} {
		if err := m.CheckPinnedHash(pinned); err != nil {
			t.Errorf("CheckPinnedHash(%q) = %v", pinned, err)
		}
	}
	var he *bundle.HashPinError
	if err := m.CheckPinnedHash("sha256:00"); !errors.As(err, &he) || !errors.Is(err, bundle.CodeHashMismatch) ||
		he.Served != m.BundleHash || !strings.Contains(err.Error(), "pinned sha256:00") {
		t.Errorf("CheckPinnedHash(another) = %v", err)
	}
	// The typed encoding parses back to the same manifest.
	typed, err := m.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	again, err := bundle.ParseManifest(typed)
	if err != nil {
		t.Fatalf("MarshalJSON output does not parse: %v\n%s", err, typed)
	}
	if d := cmp.Diff(m.Metadata, again.Metadata); d != "" {
		t.Errorf("metadata after MarshalJSON (-first +again):\n%s", d)
	}
}

func TestParseManifestNamesEveryProblem(t *testing.T) {
	hash := strings.Repeat("0", 64)
	for _, tc := range []struct {
		text   string
		fields []string
	}{
		{`{"v":2,"name":"x","bundleHash":"` + hash + `","files":[]}`, []string{"v"}},
		{`{"v":1,"name":"x","bundleHash":"nope","files":[]}`, []string{"bundleHash"}},
		{`{"v":1,"files":[]}`, []string{"name", "bundleHash"}},
		{`{"v":1,"name":"","bundleHash":"` + hash + `","files":[{"path":"a","sha256":"short","bytes":1}]}`, []string{"name", "files[0].sha256"}},
		{`{"v":"1","name":7,"bundleHash":"` + hash + `","files":{}}`, []string{"v", "name", "files"}},
		{`{"v":1,"name":"x","bundleHash":"` + hash + `","files":[{"Path":"a","sha256":"` + hash + `","bytes":1.5}]}`, []string{"files[0].path", "files[0].bytes"}},
		{`{"v":1,"name":"x","bundleHash":"` + hash + `","files":[],"tools":{"active":"read"},"model":{"primary":{"id":1}},"ui":{"autoAnswer":{"q":3}},"budget":{"maxCost":"5"}}`,
			[]string{"tools.active", "model.primary.provider", "model.primary.id", "ui.autoAnswer[\"q\"]", "budget.maxCost"}},
		{`[1]`, []string{"(manifest)"}},
		{`{"v":1`, []string{"(manifest)"}},
		// Consistency beyond the reference's schema.
		{`{"v":1,"name":"x","bundleHash":"` + hash + `","files":[{"path":"a","sha256":"` + hash + `","bytes":1}]}`, []string{"bundleHash"}},
	} {
		_, err := bundle.ParseManifest([]byte(tc.text))
		var me *bundle.ManifestError
		if !errors.As(err, &me) || !errors.Is(err, bundle.CodeInvalidManifest) {
			t.Errorf("ParseManifest(%s) = %v, want a ManifestError", tc.text, err)
			continue
		}
		var fields []string
		for _, p := range me.Problems {
			fields = append(fields, p.Field)
		}
		if d := cmp.Diff(tc.fields, fields); d != "" {
			t.Errorf("ParseManifest(%s): fields (-want +got):\n%s\n%v", tc.text, d, err)
		}
	}
}

func TestParseManifestRefusesDuplicatePaths(t *testing.T) {
	files := []bundle.File{{Path: "a", SHA256: sum("a")}, {Path: "a", SHA256: sum("a")}}
	_, err := bundle.ParseManifest([]byte(validManifestJSON(t, files, "")))
	if !errors.Is(err, bundle.CodeInvalidManifest) || !strings.Contains(err.Error(), `"a" twice`) {
		t.Errorf("ParseManifest with a path twice = %v", err)
	}
}

// Checklist 41 and 42: unsafe paths are unsafe_path errors, every one named.
func TestParseManifestRefusesUnsafePaths(t *testing.T) {
	for _, paths := range [][]string{{"../escape.txt"}, {"/etc/passwd"}, {"CON.txt"}, {"Foo.ts", "foo.ts"}} {
		var files []bundle.File
		for _, p := range paths {
			files = append(files, bundle.File{Path: p, SHA256: sum(p)})
		}
		_, err := bundle.ParseManifest([]byte(validManifestJSON(t, files, "")))
		var pe *pathsafe.Error
		if !errors.Is(err, bundle.CodeUnsafePath) || !errors.As(err, &pe) || pe.Path != paths[len(paths)-1] {
			t.Errorf("ParseManifest(%q) = %v, want unsafe_path naming the path", paths, err)
		}
	}
}

func TestResources(t *testing.T) {
	m := &bundle.Manifest{Name: "b", Metadata: bundle.Metadata{
		Skills:     []string{"skills"},
		Extensions: []string{"extensions/hello.ts"},
		Tools:      &bundle.Tools{Active: []string{"read"}},
	}}
	dir := t.TempDir()
	r, err := m.Resources(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := bundle.Resources{
		Skills:     []string{filepath.Join(dir, "skills")},
		Extensions: []string{filepath.Join(dir, "extensions", "hello.ts")},
		Tools:      []string{"read"},
	}
	if d := cmp.Diff(want, r); d != "" {
		t.Errorf("resources (-want +got):\n%s", d)
	}
	if r.Prompts != nil {
		t.Error("no prompts should resolve to none")
	}
	m.Prompts = []string{"../x"}
	if _, err := m.Resources(dir); !errors.Is(err, pathsafe.ErrUnsafe) || !strings.Contains(err.Error(), "prompts[0]") {
		t.Errorf("Resources with an unsafe prompt = %v", err)
	}
}

func TestValidName(t *testing.T) {
	for _, n := range []string{"default", "a", "A-b_c.9", "0x"} {
		if err := bundle.ValidName(n); err != nil {
			t.Errorf("ValidName(%q) = %v", n, err)
		}
	}
	for _, n := range []string{"", ".x", "-x", "a/b", "a b", "..", "é", "a%2F"} {
		if err := bundle.ValidName(n); err == nil {
			t.Errorf("ValidName(%q) = nil", n)
		}
	}
}

func TestNodePlatform(t *testing.T) {
	for goos, want := range map[string]string{"linux": "linux", "darwin": "darwin", "windows": "win32", "illumos": "sunos", "freebsd": "freebsd"} {
		if got := bundle.NodePlatform(goos); got != want {
			t.Errorf("NodePlatform(%s) = %s, want %s", goos, got, want)
		}
	}
}
