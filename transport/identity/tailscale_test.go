package identity

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// recording replays recorded CLI output, keyed by the joined arguments,
// and remembers every call.
type recording struct {
	mu      sync.Mutex
	replies map[string]Output
	calls   []string // "bin arg arg"
}

func (r *recording) run(_ context.Context, bin string, args ...string) (Output, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, bin+" "+strings.Join(args, " "))
	out, ok := r.replies[strings.Join(args, " ")]
	if !ok {
		return Output{Stderr: []byte("unexpected command"), ExitCode: 2}, nil
	}
	return out, nil
}

func newRecorded(t *testing.T) (*Tailscale, *recording) {
	rec := &recording{replies: map[string]Output{
		"version":                   {Stdout: []byte("1.80.3\n")},
		"whois --json 100.87.12.34": {Stdout: readTestdata(t, "whois-buildbox.json")},
		"whois --json 100.64.9.9":   {Stdout: readTestdata(t, "whois-no-user.json")},
		"whois --json 100.64.0.99":  {Stderr: []byte("peer not found\n"), ExitCode: 1},
		"ip -4":                     {Stdout: readTestdata(t, "ip-4.txt")},
		"status --json":             {Stdout: readTestdata(t, "status.json")},
	}}
	return &Tailscale{Binary: "/opt/tailscale", Run: rec.run}, rec
}

func TestTailscaleWhoisStripsMappedIPv4(t *testing.T) {
	ts, rec := newRecorded(t)
	for _, addr := range []string{"100.87.12.34", "::ffff:100.87.12.34"} {
		id, err := ts.Whois(t.Context(), netip.MustParseAddr(addr))
		if err != nil {
			t.Fatalf("Whois(%s): %v", addr, err)
		}
		if id != (Identity{Machine: "buildbox", User: "ana@github"}) {
			t.Errorf("Whois(%s) = %+v", addr, id)
		}
	}
	want := []string{"/opt/tailscale whois --json 100.87.12.34", "/opt/tailscale whois --json 100.87.12.34"}
	if !slices.Equal(rec.calls, want) {
		t.Errorf("calls = %q, want %q", rec.calls, want)
	}
}

func TestTailscaleWhoisFailures(t *testing.T) {
	ts, _ := newRecorded(t)

	_, err := ts.Whois(t.Context(), netip.MustParseAddr("100.64.9.9"))
	if !errors.Is(err, ErrIncompleteIdentity) || !strings.Contains(err.Error(), "100.64.9.9") {
		t.Errorf("incomplete: err = %v, want ErrIncompleteIdentity naming the address", err)
	}

	_, err = ts.Whois(t.Context(), netip.MustParseAddr("100.64.0.99"))
	ce, ok := errors.AsType[*CommandError](err)
	if !ok || ce.ExitCode != 1 || ce.Stderr != "peer not found" {
		t.Fatalf("unknown peer: err = %#v, want *CommandError exit 1", err)
	}
	if want := "identity: tailscale whois --json 100.64.0.99 failed (exit 1): peer not found"; err.Error() != want {
		t.Errorf("message = %q, want %q", err, want)
	}

	if _, err := ts.Whois(t.Context(), netip.Addr{}); !errors.Is(err, ErrInvalidAddr) {
		t.Errorf("zero address: err = %v, want ErrInvalidAddr", err)
	}
}

func TestTailscaleIPv4AndStatus(t *testing.T) {
	ts, rec := newRecorded(t)
	ip, err := ts.IPv4(t.Context())
	if err != nil || ip != netip.MustParseAddr("100.87.12.34") {
		t.Errorf("IPv4 = %v, %v", ip, err)
	}
	st, err := ts.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Peers) != 3 || st.Self.HostName != "orchestrator" {
		t.Errorf("Status = %+v", st)
	}

	rec.replies["ip -4"] = Output{Stderr: []byte("tailscaled is not running"), ExitCode: 1}
	_, err = ts.IPv4(t.Context())
	if err == nil || !strings.Contains(err.Error(), "tailscale ip -4 failed") {
		t.Errorf("failing ip -4: err = %v, want it to say \"tailscale ip -4 failed\"", err)
	}
}

// The CLI has no timeout of its own; ours ends a wedged call.
func TestTailscaleTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ts := &Tailscale{Binary: "tailscale", Run: func(ctx context.Context, _ string, _ ...string) (Output, error) {
			<-ctx.Done() // tailscaled never answers
			return Output{}, ctx.Err()
		}}
		start := time.Now()
		_, err := ts.Whois(t.Context(), netip.MustParseAddr("100.87.12.34"))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want DeadlineExceeded", err)
		}
		if _, ok := errors.AsType[*CommandError](err); !ok {
			t.Errorf("err = %#v, want *CommandError", err)
		}
		if took := time.Since(start); took != DefaultTimeout {
			t.Errorf("gave up after %v, want DefaultTimeout %v", took, DefaultTimeout)
		}

		ts.Timeout = 250 * time.Millisecond
		start = time.Now()
		if _, err := ts.IPv4(t.Context()); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v", err)
		}
		if took := time.Since(start); took != ts.Timeout {
			t.Errorf("gave up after %v, want %v", took, ts.Timeout)
		}
	})
}

// lookupFixture is a fake platform for FindBinary: what is on PATH, which
// files exist, and which binaries answer `version`.
type lookupFixture struct {
	onPath  string
	files   []string
	working []string
	probes  []string
}

func (f *lookupFixture) tailscale(goos string) *Tailscale {
	return &Tailscale{
		goos: goos,
		lookPath: func(string) (string, error) {
			if f.onPath == "" {
				return "", errors.New("not on PATH")
			}
			return f.onPath, nil
		},
		exists: func(p string) bool { return slices.Contains(f.files, p) },
		Run: func(_ context.Context, bin string, args ...string) (Output, error) {
			f.probes = append(f.probes, bin+" "+strings.Join(args, " "))
			if slices.Contains(f.working, bin) {
				return Output{Stdout: []byte("1.80.3\n")}, nil
			}
			return Output{ExitCode: 1}, nil
		},
	}
}

func TestFindBinary(t *testing.T) {
	tests := []struct {
		name   string
		goos   string
		fix    lookupFixture
		want   string
		probes []string
	}{
		{
			name: "PATH is preferred",
			goos: "linux",
			fix:  lookupFixture{onPath: "/home/ana/bin/tailscale", files: []string{"/usr/bin/tailscale"}, working: []string{"/home/ana/bin/tailscale", "/usr/bin/tailscale"}},
			want: "/home/ana/bin/tailscale", probes: []string{"/home/ana/bin/tailscale version"},
		},
		{
			name: "linux falls back to /usr/bin first",
			goos: "linux",
			fix:  lookupFixture{files: []string{"/usr/local/bin/tailscale", "/usr/bin/tailscale"}, working: []string{"/usr/local/bin/tailscale", "/usr/bin/tailscale"}},
			want: "/usr/bin/tailscale", probes: []string{"/usr/bin/tailscale version"},
		},
		{
			name: "a PATH binary that fails version is skipped",
			goos: "linux",
			fix:  lookupFixture{onPath: "/snap/bin/tailscale", files: []string{"/usr/local/bin/tailscale"}, working: []string{"/usr/local/bin/tailscale"}},
			want: "/usr/local/bin/tailscale", probes: []string{"/snap/bin/tailscale version", "/usr/local/bin/tailscale version"},
		},
		{
			name: "macOS app bundle first",
			goos: "darwin",
			fix:  lookupFixture{files: []string{"/opt/homebrew/bin/tailscale", "/Applications/Tailscale.app/Contents/MacOS/Tailscale"}, working: []string{"/opt/homebrew/bin/tailscale", "/Applications/Tailscale.app/Contents/MacOS/Tailscale"}},
			want: "/Applications/Tailscale.app/Contents/MacOS/Tailscale", probes: []string{"/Applications/Tailscale.app/Contents/MacOS/Tailscale version"},
		},
		{
			name: "windows Program Files",
			goos: "windows",
			fix:  lookupFixture{files: []string{`C:\Program Files\Tailscale\tailscale.exe`}, working: []string{`C:\Program Files\Tailscale\tailscale.exe`}},
			want: `C:\Program Files\Tailscale\tailscale.exe`, probes: []string{`C:\Program Files\Tailscale\tailscale.exe version`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts := tt.fix.tailscale(tt.goos)
			got, err := ts.FindBinary(t.Context())
			if err != nil || got != tt.want {
				t.Fatalf("FindBinary = %q, %v; want %q", got, err, tt.want)
			}
			if !slices.Equal(tt.fix.probes, tt.probes) {
				t.Errorf("probes = %q, want %q", tt.fix.probes, tt.probes)
			}
			// Success is cached: no second probe.
			if _, err := ts.FindBinary(t.Context()); err != nil || len(tt.fix.probes) != len(tt.probes) {
				t.Errorf("second lookup probed again: %q", tt.fix.probes)
			}
		})
	}
}

func TestFindBinaryNotFoundIsNotCached(t *testing.T) {
	fix := &lookupFixture{files: []string{"/usr/bin/tailscale"}} // exists but broken
	ts := fix.tailscale("linux")
	if _, err := ts.FindBinary(t.Context()); !errors.Is(err, ErrTailscaleNotFound) {
		t.Fatalf("err = %v, want ErrTailscaleNotFound", err)
	}
	if _, err := ts.Whois(t.Context(), netip.MustParseAddr("100.87.12.34")); !errors.Is(err, ErrTailscaleNotFound) {
		t.Fatalf("Whois err = %v, want ErrTailscaleNotFound", err)
	}
	// tailscale gets repaired; the next call finds it without a restart.
	fix.working = []string{"/usr/bin/tailscale"}
	if got, err := ts.FindBinary(t.Context()); err != nil || got != "/usr/bin/tailscale" {
		t.Errorf("after repair: %q, %v", got, err)
	}
}

func TestFallbackPaths(t *testing.T) {
	if got := FallbackPaths("linux"); got[0] != "/usr/bin/tailscale" {
		t.Errorf("linux: %q", got)
	}
	if got := FallbackPaths("freebsd"); got[0] != "/usr/bin/tailscale" {
		t.Errorf("other unix: %q", got)
	}
	if got := FallbackPaths("darwin"); got[0] != "/Applications/Tailscale.app/Contents/MacOS/Tailscale" {
		t.Errorf("darwin: %q", got)
	}
	if got := FallbackPaths("windows"); len(got) != 1 || !strings.HasPrefix(got[0], `C:\Program Files\`) {
		t.Errorf("windows: %q", got)
	}
}
