package cli

import (
	"encoding/json"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/alecthomas/kong"
)

// Build describes the binary: the module version it was built from and
// the version control state of the build, as the Go toolchain recorded
// them.
type Build struct {
	// Module is the main module's path and Version its version
	// ("(devel)" for a build from a work tree).
	Module  string `json:"module"`
	Version string `json:"version"`
	// Revision is the VCS commit, Time its time, Modified whether the
	// work tree had uncommitted changes; empty when not recorded (go run,
	// go test, -buildvcs=false).
	Revision string `json:"revision,omitempty"`
	Time     string `json:"time,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
}

// BuildInfo reads the binary's build information.
func BuildInfo() Build {
	b := Build{Version: "(devel)", Go: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.Module = info.Main.Path
	if info.Main.Version != "" {
		b.Version = info.Main.Version
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.time":
			b.Time = s.Value
		case "vcs.modified":
			b.Modified = s.Value == "true"
		}
	}
	return b
}

// String is the one line `--version` prints: version, revision (with
// "+dirty" for a modified tree), Go version and platform.
func (b Build) String() string {
	s := b.Version
	if b.Revision != "" {
		rev := b.Revision
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if b.Modified {
			rev += "+dirty"
		}
		s += " (" + rev
		if b.Time != "" {
			s += ", " + b.Time
		}
		s += ")"
	}
	return s + " " + b.Go + " " + b.Platform
}

// VersionString is BuildInfo().String().
func VersionString() string { return BuildInfo().String() }

// VersionCmd is the `version` command of both binaries.
type VersionCmd struct {
	JSON bool `help:"Print JSON instead of text." env:"PIFLEET_JSON"`
}

// Run prints the binary's name and build.
func (c *VersionCmd) Run(k *kong.Context, out *Output) error {
	b := BuildInfo()
	if c.JSON {
		enc := json.NewEncoder(out.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(b)
	}
	_, err := fmt.Fprintf(out.Out, "%s %s\n", k.Model.Name, b)
	return err
}
