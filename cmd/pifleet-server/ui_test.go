package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"example.com/pifleet/fleet/controlapi"
)

// TestUIPrintsAOneTimeLogin: bare `ui` asks the server for a login and
// prints its link; a server without a page says how to start one; `ui
// answer` is still the dialog command.
func TestUIPrintsAOneTimeLogin(t *testing.T) {
	b := &scriptedBackend{}
	status, _, errOut := runCLI(t, "ui", "--no-open", apiServer(t, b))
	if status == 0 || !strings.Contains(errOut, "serve --ui") {
		t.Errorf("ui against a server without a page: %d %q", status, errOut)
	}

	addr := webLoginServer(t, b)
	status, out, errOut := runCLI(t, "ui", "--no-open", "--api="+addr.String())
	if status != 0 || !strings.HasPrefix(out, "http://127.0.0.1:9791/login?code=") || !strings.Contains(errOut, "once") {
		t.Fatalf("ui: %d %q %q", status, out, errOut)
	}
	status, out, _ = runCLI(t, "ui", "--no-open", "--json", "--api="+addr.String())
	if status != 0 || !strings.Contains(out, `"url": "http://127.0.0.1:9791/login?code=`) || !strings.Contains(out, `"expiresAt"`) {
		t.Errorf("ui --json: %d %q", status, out)
	}
	if status, _, errOut := runCLI(t, "ui", "answer", "--help"); status != 0 {
		t.Errorf("ui answer --help: %d %s", status, errOut)
	}
}

// webLoginServer serves a control API that mints logins for a page at
// http://127.0.0.1:9791, until the test ends.
func webLoginServer(t *testing.T, b controlapi.Backend) controlapi.Addr {
	t.Helper()
	addr := controlapi.DefaultAddr(socketDir(t))
	l, err := controlapi.Listen(addr, controlapi.ListenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	auth := controlapi.NewWebAuth("http://127.0.0.1:9791", "tok")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- controlapi.Serve(ctx, l, controlapi.NewServer(b, controlapi.WithWebAuth(auth)), time.Second)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return addr
}

// TestUIOpensTheLinkOnADesktop: on a Linux desktop (a display) bare `ui`
// hands the link to xdg-open; without a display it only prints it.
func TestUIOpensTheLinkOnADesktop(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("xdg-open is the Linux opener")
	}
	addr := webLoginServer(t, &scriptedBackend{})
	bin := t.TempDir()
	opened := filepath.Join(t.TempDir(), "opened")
	if err := os.WriteFile(filepath.Join(bin, "xdg-open"), []byte("#!/bin/sh\nprintf '%s' \"$1\" > "+opened+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("PIFLEET_UI_NO_OPEN", "")
	os.Unsetenv("PIFLEET_UI_NO_OPEN")
	t.Setenv("WAYLAND_DISPLAY", "")
	t.Setenv("DISPLAY", "")
	status, out, errOut := runCLI(t, "ui", "--api="+addr.String())
	if _, err := os.Stat(opened); status != 0 || !os.IsNotExist(err) || strings.Contains(errOut, "Opened") {
		t.Errorf("ui without a display: %d %q %q, opener ran: %v", status, out, errOut, err == nil)
	}
	t.Setenv("DISPLAY", ":0")
	status, out, errOut = runCLI(t, "ui", "--api="+addr.String())
	got, err := os.ReadFile(opened)
	if status != 0 || err != nil || string(got) != strings.TrimSpace(out) || !strings.HasPrefix(string(got), "http://127.0.0.1:9791/login?code=") ||
		!strings.Contains(errOut, "Opened it in your browser.") {
		t.Errorf("ui on a desktop: %d %q %q, opened %q (%v)", status, out, errOut, got, err)
	}
}

func TestServeUIRefusesARemoteAddressUnlessAllowed(t *testing.T) {
	c := &ServeCmd{UI: "0.0.0.0:0"}
	if _, err := c.uiListen(); err == nil || !strings.Contains(err.Error(), "not a loopback") {
		t.Errorf("--ui 0.0.0.0:0: %v, want a refusal", err)
	}
	// Explicitly allowed, it listens there.
	c = &ServeCmd{UI: "0.0.0.0:0", UIAllowRemote: true}
	remote, err := c.uiListen()
	if err != nil {
		t.Fatalf("--ui 0.0.0.0:0 --ui-allow-remote: %v", err)
	}
	if host, _, _ := net.SplitHostPort(remote.Addr().String()); host != "0.0.0.0" && host != "::" {
		t.Errorf("--ui 0.0.0.0:0 --ui-allow-remote listens on %s", remote.Addr())
	}
	remote.Close()
	c = &ServeCmd{UI: ":0"}
	l, err := c.uiListen()
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if host, _, _ := net.SplitHostPort(l.Addr().String()); host != "127.0.0.1" {
		t.Errorf("--ui :0 listens on %s, want loopback", l.Addr())
	}
	if _, err := (&ServeCmd{UI: "unix:/tmp/x.sock"}).uiListen(); err == nil {
		t.Error("--ui on a unix socket accepted")
	}
}
