package catalog

import (
	"encoding/json"
	"errors"
	"testing"

	"example.com/pifleet/fleet/controlapi"
)

// FuzzArguments: whatever a model sends as a tool's arguments, the
// catalogue either accepts them or refuses them with bad_request; it never
// panics. Only the checking runs: the arguments never reach a fleet.
func FuzzArguments(f *testing.F) {
	for _, s := range []string{`{}`, `{"instanceId":"i-1","text":"x","wait":false}`, `{"tools":["a",1]}`, `null`, `[`,
		`{"timeoutSeconds":-1}`, `{"value":{"a":1}}`, `{"disposition":"stop","taskId":null}`} {
		f.Add("remote_prompt", s)
		f.Add("remote_ui_answer", s)
	}
	c := New(&fakeFleet{})
	f.Fuzz(func(t *testing.T, name, args string) {
		tl := c.byName[name]
		if tl == nil {
			return
		}
		parsed, err := tl.check(json.RawMessage(args))
		if err != nil {
			var e *controlapi.Error
			if !errors.As(err, &e) || e.Code != controlapi.CodeBadRequest {
				t.Fatalf("%s %q: %v", name, args, err)
			}
			return
		}
		for _, p := range tl.params {
			if _, ok := parsed[p.name]; !ok && p.required {
				t.Fatalf("%s %q: required %s missing but accepted", name, args, p.name)
			}
		}
	})
}
