package agent

import (
	"runtime/debug"
	"testing"
)

func TestVersionOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		info debug.BuildInfo
		want string
	}{
		{"tagged main module", debug.BuildInfo{Main: debug.Module{Path: ModulePath, Version: "v0.3.1"}}, "v0.3.1"},
		{"as a dependency", debug.BuildInfo{Main: debug.Module{Path: "example.org/app", Version: "v1.0.0"},
			Deps: []*debug.Module{{Path: ModulePath, Version: "v0.2.0"}}}, "v0.2.0"},
		{"checkout", debug.BuildInfo{Main: debug.Module{Path: ModulePath, Version: "(devel)"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}},
			"devel+0123456789ab-dirty"},
		{"nothing known", debug.BuildInfo{Main: debug.Module{Path: ModulePath, Version: "(devel)"}}, "devel"},
	} {
		if got := versionOf(&tc.info); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestCapAndTail(t *testing.T) {
	if got := capChars("héllo", 2); got != "hé" {
		t.Errorf("capChars %q", got)
	}
	if got := tailChars("  abcdef \n", 3); got != "def" {
		t.Errorf("tailChars %q", got)
	}
	if got := capBytes("aé", 2); got != "a" {
		t.Errorf("capBytes cut a rune: %q", got)
	}
	if got := parseModel("faux/faux-1"); got.Provider != "faux" || got.ID != "faux-1" {
		t.Errorf("parseModel %+v", got)
	}
}

// FuzzParseModel: any string splits without panicking and round-trips
// when it has a provider.
func FuzzParseModel(f *testing.F) {
	for _, s := range []string{"faux/faux-1", "", "/", "a/b/c", "noslash"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m := parseModel(s)
		if m.Provider != "" && m.Provider+"/"+m.ID != s {
			t.Fatalf("%q → %+v", s, m)
		}
	})
}
