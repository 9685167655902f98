package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"example.com/pifleet/fleet/controlapi"
	"example.com/pifleet/fleet/mcpserver"
	"example.com/pifleet/piextension"
)

// MCPCmd is `mcp`: an MCP server over stdio (or streamable HTTP on
// loopback) offering the running server's tool catalogue.
type MCPCmd struct {
	APIFlags `embed:""`
	HTTP     string `help:"Serve MCP over streamable HTTP at this loopback address (e.g. 127.0.0.1:9790) instead of stdio; clients must send the control API's bearer token (--api-token-file, created if missing)." env:"PIFLEET_MCP_HTTP" placeholder:"ADDR"`
}

// Run serves until the client disconnects (stdio) or SIGINT/SIGTERM.
func (c *MCPCmd) Run(log zerolog.Logger, out *Output) error {
	return c.withClient(func(ctx context.Context, cl *controlapi.Client) error {
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		s, err := mcpserver.New(lctx, cl)
		cancel()
		if err != nil {
			return fmt.Errorf("mcp: reading the tool catalogue: %w", err)
		}
		if c.HTTP == "" {
			return s.Run(ctx, &mcp.StdioTransport{})
		}
		return c.serveHTTP(ctx, log, out, s)
	})
}

func (c *MCPCmd) serveHTTP(ctx context.Context, log zerolog.Logger, out *Output, s *mcpserver.Server) error {
	addr, err := controlapi.ParseAddr(c.HTTP)
	if err != nil {
		return err
	}
	if addr.IsUnix() {
		return errors.New("mcp: --http takes a loopback HOST:PORT, not a socket")
	}
	tok, err := controlapi.LoadOrCreateToken(c.APITokenFile)
	if err != nil {
		return err
	}
	ln, err := controlapi.Listen(addr, controlapi.ListenOptions{}) // refuses anything but loopback
	if err != nil {
		return err
	}
	go s.RelayWakes(ctx)
	mux := http.NewServeMux()
	mux.Handle("/mcp", s.Handler(tok))
	fmt.Fprintf(out.Err, "pifleet mcp: streamable HTTP at http://%s/mcp (bearer token in %s)\n", ln.Addr(), c.APITokenFile)
	log.Info().Str("addr", ln.Addr().String()).Msg("mcp over streamable HTTP")
	return controlapi.Serve(ctx, ln, mux, 5*time.Second)
}

// PiExtensionCmd is `pi-extension`: the pi extension that gives a pi the
// fleet's tools.
type PiExtensionCmd struct {
	Install bool   `help:"Install it into pi's extensions directory, where every pi loads it." env:"PIFLEET_PI_EXTENSION_INSTALL"`
	Dir     string `help:"pi's extensions directory (default ~/.pi/agent/extensions)." env:"PIFLEET_PI_EXTENSION_DIR" type:"path" placeholder:"DIR"`
}

// Run writes the extension and prints its path.
func (c *PiExtensionCmd) Run(out *Output) error {
	dir := c.Dir
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return err
		}
		dir = filepath.Join(home, ".pi", "agent", "extensions")
		if !c.Install {
			// Not installed: a copy pi loads with `pi -e PATH` only.
			dir = filepath.Join(home, ".pi", "agent", "fleet", "pi-extension")
		}
	}
	path, err := piextension.Write(dir)
	if err != nil {
		return err
	}
	fmt.Fprintln(out.Out, path)
	return nil
}
