package identity

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

func addJSONSeeds(f *testing.F, glob string) {
	files, err := filepath.Glob(filepath.Join("testdata", glob))
	if err != nil || len(files) == 0 {
		f.Fatalf("no seeds for %s: %v", glob, err)
	}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
}

// FuzzParseWhois: never panics; a success always names a machine and a
// user, and the machine never ends in a dot.
func FuzzParseWhois(f *testing.F) {
	addJSONSeeds(f, "whois-*.json")
	f.Add([]byte(`{"Node":{"Name":"a.b."},"UserProfile":{"LoginName":"u"}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		id, err := ParseWhois(data)
		if err != nil {
			return
		}
		if id.Machine == "" || id.User == "" {
			t.Fatalf("success with an incomplete identity %+v", id)
		}
	})
}

// FuzzParseStatus: never panics; every reported address is valid.
func FuzzParseStatus(f *testing.F) {
	addJSONSeeds(f, "status*.json")
	f.Add([]byte(`{"Peer":{"k":{"TailscaleIPs":["100.64.0.1"]}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := ParseStatus(data)
		if err != nil {
			return
		}
		for _, p := range append([]Peer{st.Self}, st.Peers...) {
			for _, a := range p.TailscaleIPs {
				if !a.IsValid() {
					t.Fatalf("invalid address in %+v", p)
				}
			}
		}
	})
}

// FuzzParseIPv4: never panics; a success is an IPv4 address.
func FuzzParseIPv4(f *testing.F) {
	f.Add([]byte("100.87.12.34\n"))
	f.Add([]byte("fd7a::1\n100.1.1.1"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, err := ParseIPv4(data)
		if err == nil && !a.Is4() {
			t.Fatalf("ParseIPv4(%q) = %v, not IPv4", data, a)
		}
	})
}

// FuzzParseStaticEntry: never panics; a parsed entry formats back to an
// entry that parses to the same address and identity.
func FuzzParseStaticEntry(f *testing.F) {
	for _, s := range []string{"127.0.0.1=server", "::1=laptop/ben@example.com", "::ffff:127.0.0.3=m", "1.2.3.4=a/b/c", "x=y", "=", "1.2.3.4=/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, entry string) {
		addr, id, err := ParseStaticEntry(entry)
		if err != nil {
			if !strings.Contains(err.Error(), "static entry") {
				t.Fatalf("error %q does not say what it is about", err)
			}
			return
		}
		if id.Machine == "" || !utf8.ValidString(id.Machine) || !utf8.ValidString(id.User) || addr.Is4In6() {
			t.Fatalf("ParseStaticEntry(%q) = %v, %+v", entry, addr, id)
		}
		again := FormatStaticEntry(addr, id)
		addr2, id2, err := ParseStaticEntry(again)
		if err != nil || addr2 != addr || id2 != id {
			t.Fatalf("round trip %q → %q: %v, %+v, %v", entry, again, addr2, id2, err)
		}
	})
}

// FuzzParseStatic: never panics; every listed address answers whois.
func FuzzParseStatic(f *testing.F) {
	f.Add("127.0.0.1=server,127.0.0.2=buildbox/ana@github")
	f.Add("127.0.0.1=a,::ffff:127.0.0.1=b")
	f.Add(",,")
	f.Fuzz(func(t *testing.T, spec string) {
		s, err := ParseStatic(spec)
		if err != nil {
			return
		}
		for _, e := range s.Entries() {
			addrText, _, _ := strings.Cut(e, "=")
			if _, err := s.Whois(t.Context(), netip.MustParseAddr(addrText)); err != nil {
				t.Fatalf("listed %q but Whois fails: %v", e, err)
			}
		}
	})
}
