package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/mattn/go-isatty"

	"example.com/pifleet/fleet/controlapi"
	"example.com/pifleet/internal/cli"
)

// APIFlags find the running server. Every client command embeds them.
type APIFlags struct {
	API          string `help:"Control API of the running server: unix:PATH, a socket path, or 127.0.0.1:PORT (default ${default_api})." default:"${default_api}" env:"PIFLEET_API" placeholder:"ADDR"`
	APITokenFile string `help:"Bearer token file, read when --api is a TCP address (default ${default_token_file})." default:"${default_token_file}" env:"PIFLEET_API_TOKEN_FILE" type:"path" placeholder:"FILE"`
}

// client connects to the API (lazily: the first call dials).
func (f *APIFlags) client() (*controlapi.Client, error) {
	addr, err := controlapi.ParseAddr(f.API)
	if err != nil {
		return nil, err
	}
	var opts []controlapi.ClientOption
	if !addr.IsUnix() {
		tok, err := controlapi.ReadToken(f.APITokenFile)
		if err != nil {
			return nil, err
		}
		opts = append(opts, controlapi.WithBearer(tok))
	}
	return controlapi.NewClient(addr, opts...)
}

// JSONFlag is --json of the commands that print something a script may
// read.
type JSONFlag struct {
	JSON bool `help:"Print JSON instead of text." env:"PIFLEET_JSON"`
}

// defaultStateDir is where serve keeps its state, its socket and its
// token.
func defaultStateDir() string {
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(".pi", "agent", "fleet", "server")
	}
	return filepath.Join(home, ".pi", "agent", "fleet", "server")
}

// apiVars are the kong variables of the API defaults.
func apiVars(stateDir string) map[string]string {
	return map[string]string{
		"default_state_dir":  stateDir,
		"default_api":        controlapi.DefaultAddr(stateDir).String(),
		"default_token_file": filepath.Join(stateDir, controlapi.TokenName),
	}
}

// printJSON writes v indented, as the --json output of a command.
func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isatty.IsTerminal(f.Fd())
}

// background is the context of a client command: it ends on Ctrl-C.
// withClient runs fn with a client of the API and a context that ends on
// SIGINT or SIGTERM, then closes the client: the frame of every client
// command.
func (f *APIFlags) withClient(fn func(ctx context.Context, cl *controlapi.Client) error) error {
	cl, err := f.client()
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := background()
	defer cancel()
	return fn(ctx, cl)
}

// TimeoutFlag is --timeout of the commands that wait (prompt --wait,
// spawn, resume, baseline create, logs -f).
type TimeoutFlag struct {
	Timeout time.Duration `help:"Stop waiting after this long, e.g. 90s or 10m (0: as long as it takes). What the server started goes on; status shows it." env:"PIFLEET_TIMEOUT"`
}

// withClientWithin is withClient with fn's context bounded by timeout (0:
// unbounded); running out of it is reported as giving up on what.
func (f *APIFlags) withClientWithin(timeout time.Duration, what string, fn func(ctx context.Context, cl *controlapi.Client) error) error {
	if timeout < 0 {
		return cli.Usagef("--timeout %s is negative", timeout)
	}
	return f.withClient(func(ctx context.Context, cl *controlapi.Client) error {
		if timeout > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeoutCause(ctx, timeout, errGaveUp)
			defer cancel()
		}
		err := fn(ctx, cl)
		if err != nil && errors.Is(context.Cause(ctx), errGaveUp) {
			return fmt.Errorf("gave up waiting for %s after %s (--timeout); it goes on on the server: see status", what, timeout)
		}
		return err
	})
}

// errGaveUp is the cause of a context that --timeout ended.
var errGaveUp = errors.New("--timeout passed")

func background() (context.Context, context.CancelFunc) {
	return signalContext()
}
