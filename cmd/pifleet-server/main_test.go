package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"example.com/pifleet/bundle/registry"
)

// runCLI runs the command line in-process and returns status, stdout, stderr.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	status := run(args, &Output{Out: &out, Err: &errOut})
	return status, out.String(), errOut.String()
}

// cliOK returns a runner of the command line against the control API
// flag api: it returns stdout, and fails the test on a non-zero status.
func cliOK(t *testing.T, api string) func(args ...string) string {
	return func(args ...string) string {
		t.Helper()
		status, out, errOut := runCLI(t, append(args, api)...)
		if status != 0 {
			t.Fatalf("%v: status %d\n%s%s", args, status, out, errOut)
		}
		return out
	}
}

// publishDefault publishes a bundle "default" made of files (path →
// content) into the registry reg.
func publishDefault(t *testing.T, reg string, files map[string]string) {
	t.Helper()
	if _, err := registry.Publish(reg, "default", source(t, files), registry.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
}

func source(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestBundlePublishListShow(t *testing.T) {
	reg := t.TempDir()
	src := source(t, map[string]string{
		"README.md": "hello\n", "skills/greet/SKILL.md": "# greet\n",
		"bundle.json": `{"skills":["skills"],"tools":{"active":["read","grep"]}}`,
	})
	status, out, errOut := runCLI(t, "bundle", "publish", "--registry", reg, "--name", "default", "--quiet", src)
	if status != 0 {
		t.Fatalf("publish: status %d, stderr %s", status, errOut)
	}
	m, err := registry.Show(reg, "default")
	if err != nil {
		t.Fatal(err)
	}
	if out != m.BundleHash+"\n" {
		t.Errorf("publish --quiet printed %q, want only the bundleHash", out)
	}
	if _, err := os.Stat(filepath.Join(reg, "default", "files", "skills", "greet", "SKILL.md")); err != nil {
		t.Errorf("registry layout: %v", err)
	}

	status, out, _ = runCLI(t, "bundle", "publish", "--registry", reg, "--name", "default", src)
	if status != 0 || !strings.Contains(out, "bundleHash "+m.BundleHash) || !strings.Contains(out, "2 files") {
		t.Errorf("publish: %d %q", status, out)
	}

	status, out, _ = runCLI(t, "bundle", "list", "--registry", reg)
	if status != 0 || !strings.Contains(out, "default") || !strings.Contains(out, m.BundleHash) {
		t.Errorf("list: %d %q", status, out)
	}
	status, out, _ = runCLI(t, "bundle", "list", "--registry", reg, "--json")
	var list []map[string]any
	if err := json.Unmarshal([]byte(out), &list); status != 0 || err != nil || len(list) != 1 || list[0]["bundleHash"] != m.BundleHash {
		t.Errorf("list --json: %d %q %v", status, out, err)
	}

	status, out, _ = runCLI(t, "bundle", "show", "--registry", reg, "default")
	for _, want := range []string{"bundleHash         " + m.BundleHash, "skills             skills\n", "tools.active       read, grep\n",
		"model              the machine's pi default\n", "review.maxRejects  3 (default)\n", "budget             none\n",
		"platforms          all\n", "ui.autoAnswer      none\n", "skills/greet/SKILL.md"} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	if status != 0 {
		t.Errorf("show: status %d", status)
	}
	status, out, _ = runCLI(t, "bundle", "show", "--registry", reg, "--json", "default")
	onDisk, _ := os.ReadFile(filepath.Join(reg, "default", "manifest.json"))
	if status != 0 || out != string(onDisk) {
		t.Errorf("show --json: %d\n%s\nwant\n%s", status, out, onDisk)
	}
}

func TestBundleRegistryFromEnvironment(t *testing.T) {
	reg := t.TempDir()
	t.Setenv("PIFLEET_REGISTRY", reg)
	t.Setenv("PIFLEET_BUNDLE_NAME", "envname")
	if status, _, errOut := runCLI(t, "bundle", "publish", "-q", "--allow-empty", source(t, map[string]string{"a": "1"})); status != 0 {
		t.Fatalf("publish: %d %s", status, errOut)
	}
	if _, err := registry.Show(reg, "envname"); err != nil {
		t.Error(err)
	}
}

func TestBundleErrors(t *testing.T) {
	reg := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bundle", "show", "--registry", reg, "nope"}, "not_found"},
		{[]string{"bundle", "publish", "--registry", reg, source(t, map[string]string{"a": "1"})}, "--name"},
		{[]string{"bundle", "publish", "--registry", reg, "--allow-empty", "--name", "../x", source(t, map[string]string{"a": "1"})}, "invalid bundle name"},
		{[]string{"bundle", "publish", "--registry", reg, "--name", "b", source(t, map[string]string{"a": "1", "bundle.json": `{"skils":[]}`})}, "skils: unknown key"},
		{[]string{"bundle", "publish", "--registry", reg, "--allow-empty", "--name", "b", source(t, map[string]string{"CON.txt": "1"})}, "reserved_name"},
		{[]string{"bundle", "publish", "--registry", reg, "--name", "b", source(t, map[string]string{"a": "1"})}, "has no bundle.json"},
		{[]string{"bundle", "publish", "--registry", reg, "--name", "b", filepath.Join(reg, "missing")}, "missing"},
		{[]string{"bundle", "teleport"}, "unexpected argument"},
	} {
		status, _, errOut := runCLI(t, tc.args...)
		if strings.Contains(errOut, "has no bundle.json") && tc.want != "has no bundle.json" {
			t.Errorf("%v refused for its missing bundle.json", tc.args)
		}
		if status == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: status %d, stderr %q; want a failure mentioning %q", tc.args, status, errOut, tc.want)
		}
	}
}

func TestHelp(t *testing.T) {
	status, out, _ := runCLI(t, "bundle", "publish", "--help")
	if status != 0 || !strings.Contains(out, "PIFLEET_REGISTRY") || !strings.Contains(out, "--quiet") {
		t.Errorf("help: %d %q", status, out)
	}
}
