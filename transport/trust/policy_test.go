package trust

import (
	"errors"
	"strings"
	"testing"

	"example.com/pifleet/transport/identity"
)

func TestParsePolicy(t *testing.T) {
	for in, want := range map[string]Policy{"allow": Allow, "steer": Steer, "deny": Deny, " Steer ": Steer, "DENY": Deny} {
		if got, err := ParsePolicy(in); err != nil || got != want {
			t.Errorf("ParsePolicy(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"", "yes", "allowed", "full", "a llow", "deny\x00"} {
		_, err := ParsePolicy(in)
		if !errors.Is(err, ErrBadPolicy) || !strings.Contains(err.Error(), "allow, steer or deny") {
			t.Errorf("ParsePolicy(%q) err = %v, want ErrBadPolicy naming the choices", in, err)
		}
	}
}

// The permission matrix, written out independently of Permits.
func TestPermitsMatrix(t *testing.T) {
	prompt := Operation{Name: "prompt", Kind: Steering}
	list := Operation{Name: "list", Kind: Viewing}
	stop := Operation{Name: "stop", Kind: Spawning}
	want := map[Policy]map[Operation]bool{
		Allow:          {OpView: true, list: true, OpSpawn: true, stop: true, OpSteer: false, prompt: false},
		Steer:          {OpView: true, list: true, OpSpawn: true, stop: true, OpSteer: true, prompt: true},
		Deny:           {OpView: false, list: false, OpSpawn: false, stop: false, OpSteer: false, prompt: false},
		Policy(""):     {OpView: false, OpSpawn: false, OpSteer: false},
		Policy("root"): {OpView: false, OpSpawn: false, OpSteer: false},
	}
	for p, ops := range want {
		for op, ok := range ops {
			if got := p.Permits(op); got != ok {
				t.Errorf("%q.Permits(%s) = %v, want %v", p, op.Name, got, ok)
			}
		}
		if p.Permits(Operation{Name: "odd", Kind: 0}) || p.Permits(Operation{Name: "odd", Kind: 9}) {
			t.Errorf("%q permits an operation of unknown kind", p)
		}
	}
}

func TestCheck(t *testing.T) {
	id := identity.Identity{Machine: "buildbox", User: "ana@github"}
	if err := Check(id, Allow, OpSpawn); err != nil {
		t.Errorf("allow + spawn: %v", err)
	}
	err := Check(id, Allow, Operation{Name: "prompt", Kind: Steering})
	if !errors.Is(err, ErrPolicyRefused) {
		t.Fatalf("allow + prompt: err = %v, want ErrPolicyRefused", err)
	}
	pe, _ := errors.AsType[*PolicyError](err)
	if pe.Identity != id || pe.Policy != Allow || pe.Operation.Name != "prompt" {
		t.Errorf("PolicyError = %+v", pe)
	}
	want := `trust: prompt on buildbox (ana@github) refused: policy is "allow" (steering needs "steer")`
	if err.Error() != want {
		t.Errorf("message = %q\nwant      %q", err, want)
	}
	if err := Check(id, Deny, OpView); err == nil || !strings.Contains(err.Error(), `policy is "deny"`) {
		t.Errorf("deny + view: %v", err)
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{Viewing: "viewing", Spawning: "spawning", Steering: "steering", 0: "Kind(0)"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", k, got, want)
		}
	}
}
