package execplane_test

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"

	"example.com/pifleet/fleet/agent/internal/execplane"
	"example.com/pifleet/transport"
)

func Example() {
	dir, _ := os.MkdirTemp("", "execplane")
	defer os.RemoveAll(dir)
	m, err := execplane.New(execplane.Config{AuditFile: filepath.Join(dir, "exec-audit.jsonl")})
	if err != nil {
		panic(err)
	}
	defer m.Close()
	frames := make(chan transport.Frame, 16)
	e, err := m.Start(execplane.Request{Mode: transport.ExecArgv, Cwd: dir, Executable: "echo", Args: []string{"hello"}},
		func(f transport.Frame) { frames <- f })
	if err != nil {
		panic(err)
	}
	e.Run() // after exec_started went out
	for f := range frames {
		switch f := f.(type) {
		case *transport.ExecOutputFrame:
			b, _ := base64.StdEncoding.DecodeString(f.Base64)
			fmt.Printf("%s %d: %s", f.Stream, int(f.Seq), b)
		case *transport.ExecExitFrame:
			fmt.Println("exit", *f.ExitCode)
			return
		}
	}
	// Output:
	// stdout 0: hello
	// exit 0
}
