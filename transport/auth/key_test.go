package auth

import (
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoadOrCreateMakesPrivateFileOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "server.key")
	r1, err := LoadOrCreate(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", st.Mode().Perm())
	}
	if dst, _ := os.Stat(filepath.Dir(path)); dst.Mode().Perm() != 0o700 {
		t.Errorf("key dir mode %v, want 0700", dst.Mode().Perm())
	}
	r2, err := LoadOrCreate(path)
	if err != nil || !SameKey(r1.Public(), r2.Public()) {
		t.Fatalf("second load: %v, same key %v", err, err == nil && SameKey(r1.Public(), r2.Public()))
	}
}

func TestRotateKeepsOldKeyForGrace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "server.key")
	old, err := LoadOrCreate(path)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	r, err := Rotate(path, 24*time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	if SameKey(r.Public(), old.Public()) {
		t.Fatal("rotation kept the current key")
	}
	back, err := ReadKeyRing(path)
	if err != nil {
		t.Fatal(err)
	}
	active := back.Active(now.Add(time.Hour))
	if len(active) != 2 || !SameKey(pub(active[0]), r.Public()) || !SameKey(pub(active[1]), old.Public()) {
		t.Fatalf("during grace: %d active keys", len(active))
	}
	if got := back.Active(now.Add(25 * time.Hour)); len(got) != 1 {
		t.Errorf("after grace: %d active keys, want 1", len(got))
	}
	// A second rotation after the grace drops the expired key.
	r3, err := Rotate(path, time.Hour, now.Add(48*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(r3.Retired) != 1 || !SameKey(pub(r3.Retired[0].Key), r.Public()) {
		t.Errorf("retired after second rotation: %d", len(r3.Retired))
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("rotated file mode %v", st.Mode().Perm())
	}
}

func TestParseKeyRingErrors(t *testing.T) {
	r := &KeyRing{Current: newKey(t), Retired: []RetiredKey{{Key: newKey(t), Until: time.Unix(1e9, 0).UTC()}}}
	good, err := r.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseKeyRing(good)
	if err != nil || !SameKey(back.Public(), r.Public()) || len(back.Retired) != 1 || !back.Retired[0].Until.Equal(r.Retired[0].Until) {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	for name, data := range map[string]string{
		"empty":        "",
		"not pem":      "hello",
		"wrong type":   "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n",
		"garbage der":  "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
		"trailing":     string(good) + "junk",
		"retired only": strings.Replace(string(good), "-----BEGIN PRIVATE KEY-----\n", "-----BEGIN PRIVATE KEY-----\nPifleet-Retired-Until: 2026-01-01T00:00:00Z\n\n", 1),
	} {
		if _, err := ParseKeyRing([]byte(data)); !errors.Is(err, ErrBadKeyFile) {
			t.Errorf("%s: %v, want ErrBadKeyFile", name, err)
		}
	}
}

func TestParsePublicKey(t *testing.T) {
	k := pub(newKey(t))
	text := FormatPublicKey(k)
	if got, err := ParsePublicKey(" " + text + "\n"); err != nil || !SameKey(got, k) {
		t.Fatalf("round trip: %v", err)
	}
	for _, bad := range []string{"", "ed25519:", text[8:], "ssh-ed25519:" + text[8:], text + "A", text[:len(text)-1], "ed25519:" + strings.Repeat("A", 43) + "="} {
		if _, err := ParsePublicKey(bad); !errors.Is(err, ErrBadKey) {
			t.Errorf("%q: %v, want ErrBadKey", bad, err)
		}
	}
	keys, err := ParsePublicKeys(text + ", " + FormatPublicKey(pub(newKey(t))) + ",")
	if err != nil || len(keys) != 2 {
		t.Errorf("list: %d keys, %v", len(keys), err)
	}
}

func TestTrustedKeysFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trusted")
	if keys, err := ReadPublicKeys(path); err != nil || keys != nil {
		t.Fatalf("missing file: %v, %v", keys, err)
	}
	k := pub(newKey(t))
	if err := WritePublicKeys(path, []ed25519.PublicKey{k}); err != nil {
		t.Fatal(err)
	}
	keys, err := ReadPublicKeys(path)
	if err != nil || len(keys) != 1 || !SameKey(keys[0], k) {
		t.Fatalf("read back: %v, %v", keys, err)
	}
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", st.Mode().Perm())
	}
}
