package fileperm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	private := filepath.Join(dir, "key")
	open := filepath.Join(dir, "token")
	os.WriteFile(private, []byte("k"), 0o600)
	os.WriteFile(open, []byte("t"), 0o644)
	got, err := Check(dir, private, open, filepath.Join(dir, "missing"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Path != dir || got[1].Path != open {
		t.Fatalf("problems %v", got)
	}
	s := Summary(got)
	if !strings.Contains(s, "is 0755 (want 0700") || !strings.Contains(s, "token is 0644 (want 0600") {
		t.Errorf("summary %q", s)
	}
	os.Chmod(dir, 0o700)
	os.Chmod(open, 0o600)
	if got, _ := Check(dir, private, open); len(got) != 0 {
		t.Errorf("private paths reported: %v", got)
	}
}
