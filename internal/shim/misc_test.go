//go:build unix

package shim

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestConfigValidation(t *testing.T) {
	good := Config{InstanceID: "i-1", Token: "t", Socket: "/s/x.sock", Command: []string{"pi"}}
	if err := good.validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	cases := map[string]struct {
		mutate func(*Config)
		field  string
	}{
		"no instance":       {func(c *Config) { c.InstanceID = "" }, "instanceId"},
		"control char":      {func(c *Config) { c.InstanceID = "i-\n" }, "instanceId"},
		"no token":          {func(c *Config) { c.Token = "" }, "token"},
		"relative socket":   {func(c *Config) { c.Socket = "x.sock" }, "socket"},
		"no command":        {func(c *Config) { c.Command = nil }, "command"},
		"empty argv0":       {func(c *Config) { c.Command = []string{""} }, "command"},
		"negative buffer":   {func(c *Config) { c.BufferBytes = -1 }, "bufferBytes"},
		"huge max line":     {func(c *Config) { c.MaxLine = 1 << 31 }, "maxLine"},
		"negative duration": {func(c *Config) { c.Linger = -1 }, "timeouts"},
	}
	for name, tc := range cases {
		cfg := good
		tc.mutate(&cfg)
		err := cfg.validate()
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field || !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v, want a ConfigError on %s", name, err, tc.field)
		}
	}
}

func TestRemoteErrorMatchesSentinels(t *testing.T) {
	cases := map[string]error{
		CodeWrongInstance: ErrWrongShim, CodeBadToken: ErrWrongShim, CodeStdinClosed: ErrStdinClosed,
		CodeExited: ErrExited, CodeBusy: ErrBusy, CodeSocketInUse: ErrSocketInUse,
		CodeConfig: ErrInvalidConfig, CodeBadResume: ErrProtocol, CodeVersion: ErrProtocol,
	}
	for code, want := range cases {
		err := fmt.Errorf("wrapped: %w", &RemoteError{Code: code})
		if !errors.Is(err, want) {
			t.Errorf("code %s does not match %v", code, want)
		}
		if errors.Is(err, ErrNoShim) {
			t.Errorf("code %s matches ErrNoShim", code)
		}
	}
	// What a shim reports for its own failures round-trips to the sentinel.
	for _, sentinel := range []error{ErrExited, ErrStdinClosed, ErrBusy} {
		if !errors.Is(remoteError(sentinel), sentinel) {
			t.Errorf("remoteError(%v) loses the sentinel", sentinel)
		}
	}
	for err, code := range map[error]string{
		&ConfigError{"x", "y"}:                  CodeConfig,
		fmt.Errorf("a: %w", ErrSocketInUse):     CodeSocketInUse,
		&codedError{CodeSpawn, errors.New("x")}: CodeSpawn,
		errors.New("bind: permission denied"):   CodeListen,
	} {
		if got := errorCode(err); got != code {
			t.Errorf("errorCode(%v) = %s, want %s", err, got, code)
		}
	}
}

func TestTailBuffer(t *testing.T) {
	var tb tailBuffer
	tb.write([]byte("hello "))
	tb.write([]byte("world"))
	if tb.String() != "hello world" {
		t.Errorf("got %q", tb.String())
	}
	tb.write([]byte(strings.Repeat("x", StderrTailBytes-1)))
	if got := tb.String(); len(got) != StderrTailBytes || !strings.HasPrefix(got, "d") {
		t.Errorf("tail of %d bytes starting %q", len(got), got[:1])
	}
	tb.write([]byte(strings.Repeat("y", 2*StderrTailBytes)))
	if got := tb.String(); got != strings.Repeat("y", StderrTailBytes) {
		t.Errorf("a write longer than the tail did not replace it")
	}
	tb.write([]byte("\xe2\x80")) // a rune cut in half
	if got := tb.String(); !strings.HasSuffix(got, "\uFFFD") {
		t.Errorf("invalid UTF-8 kept: %q", got[len(got)-4:])
	}
}

// The command-line contract of the shim process, as cmd/pifleet-agent
// exposes it.
func TestMainContract(t *testing.T) {
	t.Run("arguments", func(t *testing.T) {
		err := exec.Command(os.Args[0], "shim", "--socket", "/x").Run()
		if code := exitCode(err); code != 2 {
			t.Errorf("exit %d (%v), want 2", code, err)
		}
	})
	t.Run("no descriptors", func(t *testing.T) {
		err := exec.Command(os.Args[0], "shim").Run()
		if code := exitCode(err); code != 2 {
			t.Errorf("exit %d (%v), want 2", code, err)
		}
	})
	t.Run("bad config", func(t *testing.T) {
		configR, configW, _ := os.Pipe()
		readyR, readyW, _ := os.Pipe()
		cmd := exec.Command(os.Args[0], "shim")
		cmd.ExtraFiles = []*os.File{configR, readyW}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		configR.Close()
		readyW.Close()
		configW.WriteString(`{"instanceId": 7}`)
		configW.Close()
		var line readyLine
		err := json.NewDecoder(readyR).Decode(&line)
		readyR.Close()
		if code := exitCode(cmd.Wait()); code != 1 {
			t.Errorf("exit %d, want 1", code)
		}
		if err != nil || line.Error == nil || line.Error.Code != CodeConfig || line.Ready != nil {
			t.Errorf("readiness line %+v (%v), want a config error", line, err)
		}
	})
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}
