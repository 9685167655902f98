package piextension

import (
	"bytes"
	_ "embed"
	"os"
	"path/filepath"
)

// FileName is the extension's file name.
const FileName = "pifleet.ts"

// Source is the extension: one TypeScript file that pi loads directly.
//
//go:embed pifleet.ts
var Source []byte

// Write puts the extension into dir as FileName (atomically: a pi that
// loads it meanwhile sees the old file or the new one) and returns its
// path. An identical file is left alone.
func Write(dir string) (string, error) {
	path := filepath.Join(dir, FileName)
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, Source) {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, ".pifleet-*.ts")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(Source); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Close(); err != nil {
		return "", err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", err
	}
	return path, nil
}
