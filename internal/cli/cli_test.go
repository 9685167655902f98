package cli_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"example.com/pifleet/internal/cli"
)

type greetCmd struct {
	Name string `arg:""`
}

func (c *greetCmd) Run(g *cli.Globals, log zerolog.Logger, out *cli.Output) error {
	switch c.Name {
	case "fail":
		return errors.New("it broke")
	case "quiet-fail":
		return cli.ExitCode(3)
	}
	_, err := out.Out.Write([]byte("hello " + c.Name + " at " + g.LogLevel + "\n"))
	return err
}

type grammar struct {
	cli.Globals
	Greet greetCmd `cmd:""`
}

func run(args ...string) (int, string, string) {
	var g grammar
	var stdout, stderr bytes.Buffer
	code := cli.Run("demo", "A demo.", &g, &g.Globals, args, &cli.Output{Out: &stdout, Err: &stderr})
	return code, stdout.String(), stderr.String()
}

func TestRunBindsGlobalsAndOutput(t *testing.T) {
	code, out, _ := run("--log-level", "debug", "greet", "ana")
	if code != 0 || out != "hello ana at debug\n" {
		t.Fatalf("code %d, out %q", code, out)
	}
}

func TestRunReportsErrorsAndExitCodes(t *testing.T) {
	if code, _, errOut := run("greet", "fail"); code != 1 || !strings.Contains(errOut, "demo: error: it broke") {
		t.Errorf("failing command: code %d, stderr %q", code, errOut)
	}
	if code, _, errOut := run("greet", "quiet-fail"); code != 3 || errOut != "" {
		t.Errorf("ExitCode: code %d, stderr %q", code, errOut)
	}
	if code, _, _ := run("nonsense"); code == 0 {
		t.Error("a parse error exited 0")
	}
	if code, out, _ := run("--help"); code != 0 || !strings.Contains(out, "A demo.") {
		t.Errorf("--help: code %d, out %q", code, out)
	}
}

func TestNewLoggerWritesJSONWhenNotATerminal(t *testing.T) {
	var buf bytes.Buffer
	log := cli.NewLogger(cli.Globals{LogLevel: "warn", LogFormat: "auto"}, &buf)
	log.Info().Msg("hidden")
	log.Warn().Msg("shown")
	if s := buf.String(); strings.Contains(s, "hidden") || !strings.HasPrefix(s, `{"level":"warn"`) {
		t.Errorf("log output %q", s)
	}
}
