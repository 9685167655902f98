package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"text/tabwriter"
	"time"

	"example.com/pifleet/fleet/controlapi"
)

// UICmd is the web page (bare `ui`) and the worker-dialog commands.
type UICmd struct {
	Open   UIOpenCmd   `cmd:"" default:"withargs" help:"Print, and on a desktop open, a link that logs a browser into the web page once (the default)."`
	List   UIListCmd   `cmd:"" help:"List the worker dialogs waiting for an answer."`
	Answer UIAnswerCmd `cmd:"" help:"Answer a worker dialog (see ui list, status or watch for pending ones)."`
}

// UIListCmd is `ui list`.
type UIListCmd struct {
	APIFlags `embed:""`
	JSONFlag `embed:""`
}

// Run lists the pending dialogs.
func (c *UIListCmd) Run(out *Output) error {
	return c.withClient(func(ctx context.Context, cl *controlapi.Client) error {
		st, err := cl.Status(ctx)
		if err != nil {
			return err
		}
		dialogs := pendingDialogs(st)
		if c.JSON {
			if dialogs == nil {
				dialogs = []controlapi.UIRequest{}
			}
			return printJSON(out.Out, dialogs)
		}
		if len(dialogs) == 0 {
			_, err := fmt.Fprintln(out.Out, "no dialogs waiting")
			return err
		}
		tw := tabwriter.NewWriter(out.Out, 0, 4, 2, ' ', 0)
		writeDialogTable(tw, dialogs)
		return tw.Flush()
	})
}

// UIOpenCmd is bare `ui`: a one-time login for the page of serve --ui.
type UIOpenCmd struct {
	APIFlags `embed:""`
	JSONFlag `embed:""`
	NoOpen   bool `help:"Only print the link; do not start a browser." env:"PIFLEET_UI_NO_OPEN"`
}

// Run mints the login, prints it and, where a desktop exists, opens it.
func (c *UIOpenCmd) Run(out *Output) error {
	return c.withClient(func(ctx context.Context, cl *controlapi.Client) error {
		l, err := cl.WebLogin(ctx)
		if errors.Is(err, controlapi.ErrNotSupported) {
			return errors.New("the server serves no web page: start it with pifleet-server serve --ui 127.0.0.1:9791")
		}
		if err != nil {
			return err
		}
		if c.JSON {
			return printJSON(out.Out, l)
		}
		if _, err := fmt.Fprintf(out.Out, "%s\n", l.URL); err != nil {
			return err
		}
		fmt.Fprintf(out.Err, "This link logs one browser in, once, until %s.\n", l.ExpiresAt.Local().Format("15:04:05"))
		if !c.NoOpen {
			if err := openBrowser(ctx, l.URL); err == nil {
				fmt.Fprintln(out.Err, "Opened it in your browser.")
			}
		}
		return nil
	})
}

// errNoDesktop: nothing here can show a web page.
var errNoDesktop = errors.New("no desktop")

// openBrowser starts the desktop's browser on url, where there is one:
// macOS, Windows, or a Linux/BSD session with a display.
func openBrowser(ctx context.Context, url string) error {
	var name string
	var args []string
	switch runtime.GOOS {
	case "darwin":
		name = "open"
	case "windows":
		name, args = "rundll32", []string{"url.dll,FileProtocolHandler"}
	default:
		if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
			return errNoDesktop
		}
		name = "xdg-open"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return errNoDesktop
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// The opener hands the link to the browser and exits.
	return exec.CommandContext(ctx, path, append(args, url)...).Run()
}

// UIAnswerCmd is `ui answer`.
type UIAnswerCmd struct {
	APIFlags `embed:""`
	JSONFlag `embed:""`
	Request  string `arg:"" help:"Dialog request id."`
	Value    string `arg:"" help:"true or false (confirm), null (cancel), or text (select, input); a JSON string literal (\"true\") sends text that looks like those."`
}

// Run answers.
func (c *UIAnswerCmd) Run(out *Output) error {
	v := uiValue(c.Value)
	return simple(&c.APIFlags, c.JSON, out, fmt.Sprintf("answered %s: %s", c.Request, v), map[string]any{"requestId": c.Request, "value": v}, func(ctx context.Context, cl *controlapi.Client) error {
		return cl.UIAnswer(ctx, c.Request, v)
	})
}

// uiValue reads a dialog answer: true, false, null and JSON string
// literals as JSON, anything else as text.
func uiValue(s string) json.RawMessage {
	switch s {
	case "true", "false", "null":
		return json.RawMessage(s)
	}
	var str string
	if json.Unmarshal([]byte(s), &str) == nil {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s)
	return b
}
