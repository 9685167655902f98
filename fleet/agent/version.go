package agent

import (
	"runtime/debug"
	"strings"
)

// ModulePath is the module this agent is built from.
const ModulePath = "example.com/pifleet"

// ModuleVersion returns the version of the pifleet module in the running
// binary, from its build information: the module version when built from
// a tagged module ("v0.3.1"), else "devel" plus the VCS revision when the
// binary was built from a checkout ("devel+1a2b3c4d5e6f-dirty"), else
// "devel". It is hello's packageVersion: never a made-up constant.
func ModuleVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	return versionOf(info)
}

func versionOf(info *debug.BuildInfo) string {
	mod := &info.Main
	if mod.Path != ModulePath {
		for _, d := range info.Deps {
			if d.Path == ModulePath {
				mod = d
				break
			}
		}
	}
	if mod.Path == ModulePath && mod.Version != "" && mod.Version != "(devel)" {
		return mod.Version
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if rev == "" {
		return "devel"
	}
	return "devel+" + strings.TrimSpace(rev[:min(12, len(rev))]) + dirty
}
