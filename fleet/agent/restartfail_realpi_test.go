//go:build unix

package agent

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"example.com/pifleet/bundle/registry"
	"example.com/pifleet/internal/pitest"
	"example.com/pifleet/transport"
)

// publishWith publishes bundle name: the faux provider and model, plus
// the extension files given (path in the bundle → source).
func publishWith(t *testing.T, root, name string, extra map[string]string) {
	t.Helper()
	src := t.TempDir()
	ext, err := os.ReadFile(pitest.FauxProvider(t))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"ext/faux-provider.ts": string(ext)}
	exts := []string{"ext/faux-provider.ts"}
	for p, content := range extra {
		files[p] = content
		exts = append(exts, p)
	}
	list, _ := json.Marshal(exts)
	files["bundle.json"] = `{"extensions":` + string(list) + `,"model":{"primary":{"provider":"faux","id":"faux-1"}}}`
	for p, content := range files {
		full := filepath.Join(src, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := registry.Publish(root, name, src, registry.PublishOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A failed rebundle or set_tools leaves bundle A's worker answering
// (issue 12), with the real pi: a rebundle to a bundle whose extension
// throws at load, and a set_tools whose restart meets an extension that
// throws once, each report the failure, and the worker then still
// answers get_state and prompts, on the same session file, its history
// kept.
func TestRealPiFailedRestartKeepsTheWorker(t *testing.T) {
	piPath := pitest.Find(t)
	root := t.TempDir()
	// "flaky" throws at the load that finds a flag file in the cwd (and
	// removes it): its first restart fails, the next start works.
	flaky := `import * as fs from "node:fs";
const flag = process.cwd() + "/fail-next-load";
if (fs.existsSync(flag)) { fs.unlinkSync(flag); throw new Error("flaky extension: failing this load"); }
export default function () {}
`
	publishWith(t, root, "a", map[string]string{"ext/flaky.ts": flaky})
	publishWith(t, root, "broken", map[string]string{"ext/throws.ts": "throw new Error(\"this extension always throws at load\");\nexport default function () {}\n"})
	ps := pitest.Command(t, pitest.RealPi, pitest.Options{})
	h := newHarness(t, hopts{agentDir: ps.AgentDir, cwd: ps.Dir, registry: root, mod: func(c *Config) {
		c.PiCommand = []string{piPath}
		c.PiArgs = []string{"--offline", "--no-extensions", "--no-skills", "--no-prompt-templates", "--no-themes", "--no-context-files"}
		c.Env = ps.Env
		c.StopGrace = 10 * time.Second
	}})
	c := h.dial(t)
	c.hello()
	inst := c.mustSpawn("s", h.cwd, "a", nil)
	id := inst.InstanceID
	// The worker's event seqs keep increasing across the restarts that
	// failed, as across any restart: a server drops an event whose seq it
	// has seen already, and would never see the recovered worker's.
	var last float64
	increasing := func(what string, f *transport.EventFrame) {
		t.Helper()
		if f.Seq == nil {
			t.Fatalf("%s: event without seq: %s", what, f.Event)
		}
		if *f.Seq <= last {
			t.Fatalf("%s: event seq %v after %v: %s", what, *f.Seq, last, f.Event)
		}
		last = *f.Seq
	}
	answers := func(what, say string) {
		t.Helper()
		gs := "gs-" + what
		c.rpc(id, "", map[string]any{"type": "get_state", "id": gs})
		f, st := c.nextEvent(id, func(e event) bool { return e.ID == gs })
		increasing(what, f)
		var data struct{ SessionFile string }
		if err := json.Unmarshal(st.Data, &data); err != nil || !st.Success || data.SessionFile != inst.SessionPath {
			t.Fatalf("%s: get_state %s (%v); want session %s", what, st.Data, err, inst.SessionPath)
		}
		c.rpc(id, "", prompt("p-"+what, "say: "+say))
		for {
			f, e := c.nextEvent(id, func(e event) bool { return e.Type == "message_end" || e.Type == "agent_settled" })
			increasing(what, f)
			if e.Type == "agent_settled" {
				break
			}
			if strings.Contains(string(e.Message), `"role":"assistant"`) && !strings.Contains(string(e.Message), say) {
				t.Fatalf("%s: the worker answered %s", what, e.Message)
			}
		}
	}
	answers("spawned", "first answer")

	rb := &transport.RebundleFrame{InstanceID: id, Bundle: "broken"}
	rb.ID = "rb"
	c.send(rb)
	r := c.reply("rb").(*transport.RebundledFrame)
	if r.Switched || r.Bundle != "a" || r.Error == nil || r.Error.Code != CodeRestartFailed {
		t.Fatalf("rebundle to a throwing extension: %+v %+v", r, r.Error)
	}
	answers("after the failed rebundle", "second answer")

	if err := os.WriteFile(filepath.Join(h.cwd, "fail-next-load"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	st := &transport.SetToolsFrame{InstanceID: id, Tools: []string{"read"}}
	st.ID = "st"
	c.send(st)
	if e, ok := c.reply("st").(*transport.ErrorFrame); !ok || e.Code != CodeRestartFailed {
		t.Fatalf("set_tools whose restart fails answered %+v", e)
	}
	answers("after the failed set_tools", "third answer")

	l := c.roundTrip("l")
	if got := l.Instances[0]; got.State != transport.InstanceRunning || got.Bundle != "a" || got.SessionPath != inst.SessionPath {
		t.Fatalf("listed %+v", got)
	}
	raw, err := os.ReadFile(inst.SessionPath)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"first answer", "second answer", "third answer"} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("the session file lacks %q", want)
		}
	}
}
