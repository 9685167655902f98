package main

import (
	"fmt"
	"runtime"

	"example.com/pifleet/fleet/agent"
)

// VersionCmd prints the module version this binary was built from.
type VersionCmd struct{}

// Run prints "pifleet-agent <version> <go version> <platform>/<arch>".
func (VersionCmd) Run(out *Output) error {
	_, err := fmt.Fprintf(out.Out, "pifleet-agent %s %s %s/%s\n", agent.ModuleVersion(), runtime.Version(), agent.Platform(), runtime.GOARCH)
	return err
}
