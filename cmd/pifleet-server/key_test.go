package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"example.com/pifleet/transport/auth"
)

// `key` creates the key pair on first use (0600) and prints the same
// public key every time; `key rotate` prints a new one and keeps the old
// one for the grace period.
func TestKeyShowAndRotate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	code, out1, errs := runCLI(t, "key", "--state-dir", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	k1, err := auth.ParsePublicKey(out1)
	if err != nil {
		t.Fatalf("printed %q: %v", out1, err)
	}
	st, err := os.Stat(filepath.Join(dir, "server.key"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", st, err)
	}
	if _, out2, _ := runCLI(t, "key", "show", "--state-dir", dir); out2 != out1 {
		t.Errorf("second show printed %q, first %q", out2, out1)
	}
	code, out3, errs := runCLI(t, "key", "rotate", "--state-dir", dir, "--grace", "1h", "--json")
	if code != 0 {
		t.Fatalf("rotate: exit %d: %s", code, errs)
	}
	var got keyJSON
	if err := json.Unmarshal([]byte(out3), &got); err != nil {
		t.Fatalf("rotate --json %q: %v", out3, err)
	}
	k2, err := auth.ParsePublicKey(got.Key)
	if err != nil || auth.SameKey(k1, k2) {
		t.Fatalf("rotated key %q (%v) is the old one or bad", got.Key, err)
	}
	if len(got.Retired) != 1 || got.Retired[0].Key != strings.TrimSpace(out1) {
		t.Errorf("retired %+v, want the old key", got.Retired)
	}
	if !strings.Contains(errs, "still proven until") {
		t.Errorf("rotate said %q", errs)
	}
	if code, _, errs := runCLI(t, "key", "rotate", "--state-dir", t.TempDir()); code == 0 {
		t.Errorf("rotating a missing key succeeded: %s", errs)
	}
	// The private key never reaches the output.
	data, _ := os.ReadFile(filepath.Join(dir, "server.key"))
	if strings.Contains(out1+out3+errs, "PRIVATE") || len(data) == 0 {
		t.Error("private key material printed")
	}
}
