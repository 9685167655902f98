package trust

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParsePolicy: never panics; a success is one of the three policies.
func FuzzParsePolicy(f *testing.F) {
	for _, s := range []string{"allow", "STEER", " deny ", "", "root"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePolicy(s)
		if err == nil && !p.Valid() {
			t.Fatalf("ParsePolicy(%q) = %q", s, p)
		}
		if err == nil {
			if again, err := ParsePolicy(string(p)); err != nil || again != p {
				t.Fatalf("round trip %q: %q, %v", p, again, err)
			}
		}
	})
}

// FuzzParsePin: never panics; a parsed pin has a machine, renders back to
// itself, and matches its own identity.
func FuzzParsePin(f *testing.F) {
	for _, s := range []string{"orchestrator", "orchestrator/ana@github", "/", "a/", " m / u ", "m/u/v"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParsePin(s)
		if err != nil {
			if !strings.Contains(err.Error(), "bad pin") {
				t.Fatalf("error %q does not say what it is about", err)
			}
			return
		}
		if p.Machine == "" || strings.Contains(p.Machine, "/") {
			t.Fatalf("ParsePin(%q) = %+v", s, p)
		}
		if again, err := ParsePin(p.String()); err != nil || again != p {
			t.Fatalf("round trip %+v: %+v, %v", p, again, err)
		}
	})
}

// FuzzDecodeDecision: never panics on a damaged record; a decoded one is
// for the machine it is stored under, with a valid policy.
func FuzzDecodeDecision(f *testing.F) {
	f.Add("buildbox", []byte(`{"machine":"buildbox","user":"ana@github","policy":"allow","decidedAt":"2026-03-01T18:22:05Z"}`))
	f.Add("buildbox", []byte(`{"machine":"other","policy":"allow"}`))
	f.Add("m", []byte(`{"machine":"m","policy":"root"}`))
	f.Add("m", []byte(`{"machine":`))
	f.Fuzz(func(t *testing.T, machine string, raw []byte) {
		d, err := decodeDecision(machine, raw)
		if err != nil {
			return
		}
		if d.Machine != machine || !d.Policy.Valid() {
			t.Fatalf("decoded %+v under %q", d, machine)
		}
	})
}

// FuzzParseAnswer: the terminal's first-contact answer is one of the
// three policies or not an answer; case and surrounding space do not
// matter, and nothing but the listed words is an answer.
func FuzzParseAnswer(f *testing.F) {
	for _, s := range []string{"y\n", " Steer ", "NO", "allow", "", "yess", "d", "deny\r\n"} {
		f.Add(s)
	}
	words := map[string]Policy{"y": Allow, "yes": Allow, "allow": Allow, "s": Steer, "steer": Steer, "n": Deny, "no": Deny, "deny": Deny}
	f.Fuzz(func(t *testing.T, line string) {
		p, ok := parseAnswer(line)
		want, known := words[strings.ToLower(strings.TrimSpace(line))]
		if ok != known || p != want {
			t.Fatalf("parseAnswer(%q) = %q, %v; want %q, %v", line, p, ok, want, known)
		}
	})
}

// FuzzOpen opens arbitrary bytes as a trust file: the result is a store
// or a *CorruptFileError naming the file, never a panic, a crash, a hang
// or an empty start of a file that held something.
func FuzzOpen(f *testing.F) {
	dir := f.TempDir()
	s, err := Open(filepath.Join(dir, "seed.db"))
	if err != nil {
		f.Fatal(err)
	}
	for _, m := range []string{"alpha", "bravo", "charlie"} {
		if _, err := s.Set(m, Allow); err != nil {
			f.Fatal(err)
		}
	}
	s.Close()
	seed, err := os.ReadFile(filepath.Join(dir, "seed.db"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	f.Add(seed[:os.Getpagesize()+100])
	f.Add([]byte{})
	f.Add([]byte("not a database"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 1<<20 {
			return
		}
		path := filepath.Join(t.TempDir(), "x.db")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := Open(path)
		var ce *CorruptFileError
		switch {
		case err == nil:
			_, _ = s.List() // a damaged record is an error, never a panic
			s.Close()
		case errors.As(err, &ce):
			if ce.Path != path {
				t.Fatalf("the error names %s, want %s", ce.Path, path)
			}
		default:
			t.Fatalf("open: %v, want nil or a *CorruptFileError", err)
		}
	})
}
