package cli_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os/exec"
	"runtime"
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
	case "usage":
		return cli.Usagef("usage is not a name")
	}
	_, err := out.Out.Write([]byte("hello " + c.Name + " at " + g.LogLevel + "\n"))
	return err
}

type grammar struct {
	cli.Globals
	Greet      greetCmd          `cmd:""`
	Version    cli.VersionCmd    `cmd:""`
	Completion cli.CompletionCmd `cmd:""`
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

// A command line that does not parse gets one line on stderr saying what
// is wrong and where the help is, nothing on stdout, and status 2.
func TestUsageErrorsAreOneLineAndExitTwo(t *testing.T) {
	for _, args := range [][]string{{"nonsense"}, {"greet"}, {"greet", "a", "--nope"}, {"greet", "usage"}} {
		code, out, errOut := run(args...)
		lines := strings.Split(strings.TrimRight(errOut, "\n"), "\n")
		if code != cli.UsageStatus || out != "" || len(lines) != 2 || !strings.HasPrefix(lines[0], "demo: error: ") ||
			!strings.Contains(lines[1], "--help' for usage.") {
			t.Errorf("%v: status %d, stdout %q, stderr %q", args, code, out, errOut)
		}
	}
	if _, _, errOut := run("greet", "a", "--nope"); !strings.Contains(errOut, "Run 'demo greet --help'") {
		t.Errorf("the hint does not name the command: %q", errOut)
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := run("--version")
	if code != 0 || !strings.HasPrefix(out, "demo ") || !strings.Contains(out, runtime.Version()) {
		t.Errorf("--version: status %d, %q", code, out)
	}
	code, out, _ = run("version")
	if code != 0 || !strings.HasPrefix(out, "demo ") || !strings.Contains(out, runtime.Version()) {
		t.Errorf("version: status %d, %q", code, out)
	}
	code, out, _ = run("version", "--json")
	var b cli.Build
	if err := json.Unmarshal([]byte(out), &b); code != 0 || err != nil || b.Go != runtime.Version() || b.Version == "" {
		t.Errorf("version --json: status %d, %v, %q", code, err, out)
	}
}

// The bash script completes commands and flags, run by a real bash; zsh
// gets the same through bashcompinit, fish its own lines.
func TestCompletion(t *testing.T) {
	code, script, _ := run("completion", "bash")
	if code != 0 {
		t.Fatalf("completion bash: %d", code)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash here")
	}
	probe := script + `
COMP_WORDS=(demo gr); COMP_CWORD=1; _demo_complete; echo "${COMPREPLY[*]}"
COMP_WORDS=(demo greet --log-l); COMP_CWORD=2; _demo_complete; echo "${COMPREPLY[*]}"
`
	out, err := exec.Command(bash, "-c", probe).CombinedOutput()
	if err != nil || string(out) != "greet\n--log-level\n" {
		t.Errorf("bash completion: %v\n%s", err, out)
	}
	if code, out, _ := run("completion", "zsh"); code != 0 || !strings.HasPrefix(out, "autoload -U +X bashcompinit") {
		t.Errorf("completion zsh: %d %q", code, out)
	}
	if code, out, _ := run("completion", "fish"); code != 0 || !strings.Contains(out, "complete -c demo -n '__fish_use_subcommand' -a greet") {
		t.Errorf("completion fish: %d %q", code, out)
	}
}
