package auth

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/subtle"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// KeyPrefix starts the text form of a public key: "ed25519:" and the 32
// key bytes in unpadded URL-safe base64 (43 characters).
const KeyPrefix = "ed25519:"

// Errors that callers may test for with errors.Is.
var (
	// ErrBadKey: a public key's text does not parse.
	ErrBadKey = errors.New("auth: bad public key")
	// ErrBadKeyFile: a key file does not parse.
	ErrBadKeyFile = errors.New("auth: bad key file")
)

// FormatPublicKey returns k's text form, as `pifleet-server key` prints it
// and --server-key takes it.
func FormatPublicKey(k ed25519.PublicKey) string {
	return KeyPrefix + base64.RawURLEncoding.EncodeToString(k)
}

// ParsePublicKey reads a key written as FormatPublicKey writes it.
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	text := strings.TrimSpace(s)
	b64, ok := strings.CutPrefix(text, KeyPrefix)
	if !ok {
		return nil, fmt.Errorf("%w %q: does not start with %q", ErrBadKey, clip(s), KeyPrefix)
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("%w %q: not unpadded URL-safe base64", ErrBadKey, clip(s))
	}
	if len(raw) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%w %q: %d bytes, an Ed25519 key has %d", ErrBadKey, clip(s), len(raw), ed25519.PublicKeySize)
	}
	return ed25519.PublicKey(raw), nil
}

// ParsePublicKeys reads a comma- or space-separated list of keys (the
// form of PIFLEET_SERVER_KEY). Empty entries are skipped.
func ParsePublicKeys(s string) ([]ed25519.PublicKey, error) {
	var out []ed25519.PublicKey
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\n' || r == '\t' }) {
		k, err := ParsePublicKey(f)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, nil
}

// SameKey compares two public keys in constant time.
func SameKey(a, b ed25519.PublicKey) bool {
	return len(a) == len(b) && subtle.ConstantTimeCompare(a, b) == 1
}

// ContainsKey reports whether k is one of keys, comparing in constant
// time.
func ContainsKey(keys []ed25519.PublicKey, k ed25519.PublicKey) bool {
	found := 0
	for _, t := range keys {
		if SameKey(t, k) {
			found = 1
		}
	}
	return found == 1
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// KeyRing is the contents of a key file: the current key, and the keys it
// replaced that are still honoured until their grace period ends.
type KeyRing struct {
	Current ed25519.PrivateKey
	Retired []RetiredKey
}

// RetiredKey is a replaced key and the end of its grace period.
type RetiredKey struct {
	Key   ed25519.PrivateKey
	Until time.Time
}

// pemType is PKCS #8's PEM label; retiredHeader marks a retired key.
const (
	pemType       = "PRIVATE KEY"
	retiredHeader = "Pifleet-Retired-Until"
)

// Active returns the keys to prove with at now: the current one first,
// then each retired key whose grace period has not ended.
func (r *KeyRing) Active(now time.Time) []ed25519.PrivateKey {
	out := []ed25519.PrivateKey{r.Current}
	for _, k := range r.Retired {
		if now.Before(k.Until) {
			out = append(out, k.Key)
		}
	}
	return out
}

// Public returns the current public key.
func (r *KeyRing) Public() ed25519.PublicKey { return r.Current.Public().(ed25519.PublicKey) }

// Marshal encodes the ring as PEM blocks of PKCS #8 private keys: the
// current key first, then each retired key with its grace period's end
// in a "Pifleet-Retired-Until" header (RFC 3339, UTC).
func (r *KeyRing) Marshal() ([]byte, error) {
	var buf bytes.Buffer
	write := func(k ed25519.PrivateKey, headers map[string]string) error {
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			return err
		}
		return pem.Encode(&buf, &pem.Block{Type: pemType, Headers: headers, Bytes: der})
	}
	if err := write(r.Current, nil); err != nil {
		return nil, err
	}
	for _, k := range r.Retired {
		if err := write(k.Key, map[string]string{retiredHeader: k.Until.UTC().Format(time.RFC3339)}); err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}

// ParseKeyRing decodes what Marshal wrote. The first block is the current
// key; every later block must carry a "Pifleet-Retired-Until" header.
// Anything else (text between blocks aside) is an error naming the block.
func ParseKeyRing(data []byte) (*KeyRing, error) {
	var r KeyRing
	for i := 0; ; i++ {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			if i == 0 {
				return nil, fmt.Errorf("%w: no PEM %q block", ErrBadKeyFile, pemType)
			}
			if len(bytes.TrimSpace(data)) != 0 {
				return nil, fmt.Errorf("%w: text after block %d is not a PEM block", ErrBadKeyFile, i)
			}
			return &r, nil
		}
		if b.Type != pemType {
			return nil, fmt.Errorf("%w: block %d is %q, want %q", ErrBadKeyFile, i+1, b.Type, pemType)
		}
		parsed, err := x509.ParsePKCS8PrivateKey(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: block %d: %v", ErrBadKeyFile, i+1, err)
		}
		k, ok := parsed.(ed25519.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("%w: block %d is a %T, not an Ed25519 key", ErrBadKeyFile, i+1, parsed)
		}
		until, retired := b.Headers[retiredHeader]
		switch {
		case i == 0 && retired:
			return nil, fmt.Errorf("%w: the first block (the current key) is marked retired", ErrBadKeyFile)
		case i == 0:
			r.Current = k
		case !retired:
			return nil, fmt.Errorf("%w: block %d has no %s header", ErrBadKeyFile, i+1, retiredHeader)
		default:
			t, err := time.Parse(time.RFC3339, until)
			if err != nil {
				return nil, fmt.Errorf("%w: block %d: %s %q is not an RFC 3339 time", ErrBadKeyFile, i+1, retiredHeader, until)
			}
			r.Retired = append(r.Retired, RetiredKey{Key: k, Until: t.UTC()})
		}
	}
}

// ReadKeyRing reads the key file at path.
func ReadKeyRing(path string) (*KeyRing, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth: key file: %w", err)
	}
	r, err := ParseKeyRing(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// LoadOrCreate reads the key file at path, creating it with a new key
// (mode 0600, its directory 0700) when it does not exist.
func LoadOrCreate(path string) (*KeyRing, error) {
	r, err := ReadKeyRing(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return r, err
	}
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("auth: generate key: %w", err)
	}
	r = &KeyRing{Current: k}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("auth: key file: %w", err)
	}
	if err := writeNew(path, r); err != nil {
		if errors.Is(err, fs.ErrExist) { // another process created it first
			return ReadKeyRing(path)
		}
		return nil, err
	}
	return r, nil
}

// Rotate replaces the current key of the file at path with a new one. The
// old key stays honoured for grace (it is proven alongside the new one,
// so agents that trust only the old key keep connecting); retired keys
// whose grace has ended are dropped. The file is replaced atomically.
func Rotate(path string, grace time.Duration, now time.Time) (*KeyRing, error) {
	old, err := ReadKeyRing(path)
	if err != nil {
		return nil, err
	}
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("auth: generate key: %w", err)
	}
	r := &KeyRing{Current: k}
	if grace > 0 {
		r.Retired = append(r.Retired, RetiredKey{Key: old.Current, Until: now.Add(grace).UTC().Truncate(time.Second)})
	}
	for _, rk := range old.Retired {
		if now.Before(rk.Until) {
			r.Retired = append(r.Retired, rk)
		}
	}
	if err := replace(path, r); err != nil {
		return nil, err
	}
	return r, nil
}

// writeNew creates path exclusively with mode 0600.
func writeNew(path string, r *KeyRing) error {
	data, err := r.Marshal()
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("auth: key file: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("auth: key file: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("auth: key file: %w", err)
	}
	return f.Close()
}

// replace writes r to a temporary file next to path (0600), syncs it and
// renames it over path.
func replace(path string, r *KeyRing) error {
	tmp := path + ".new"
	os.Remove(tmp)
	if err := writeNew(tmp, r); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("auth: key file: %w", err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// WritePublicKeys stores keys, one a line, in a file of mode 0600 (the
// agent's trusted server keys learnt on first use). It replaces the file
// atomically.
func WritePublicKeys(path string, keys []ed25519.PublicKey) error {
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(FormatPublicKey(k))
		b.WriteByte('\n')
	}
	tmp := path + ".new"
	os.Remove(tmp)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("auth: trusted keys: %w", err)
	}
	_, err = f.WriteString(b.String())
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("auth: trusted keys: %w", err)
	}
	return nil
}

// ReadPublicKeys reads a file WritePublicKeys wrote (a missing file is
// no keys and no error).
func ReadPublicKeys(path string) ([]ed25519.PublicKey, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("auth: trusted keys: %w", err)
	}
	keys, err := ParsePublicKeys(string(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return keys, nil
}
