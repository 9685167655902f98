package trust

import (
	"errors"
	"fmt"
	"strings"

	"example.com/pifleet/transport/identity"
)

// Policy is what a machine may do in the fleet.
type Policy string

// The three policies.
const (
	// Allow: the machine may be viewed and spawned on, but not steered.
	Allow Policy = "allow"
	// Steer: full control.
	Steer Policy = "steer"
	// Deny: every connection is refused before any frame is processed.
	Deny Policy = "deny"
)

// ErrBadPolicy: a policy name is none of allow, steer, deny; matched by
// every *BadPolicyError.
var ErrBadPolicy = errors.New("trust: bad policy")

// BadPolicyError names a policy that is none of allow, steer, deny.
type BadPolicyError struct {
	Policy string
}

func (e *BadPolicyError) Error() string {
	return fmt.Sprintf("%v %q: want allow, steer or deny", ErrBadPolicy, e.Policy)
}

// Is makes errors.Is(err, ErrBadPolicy) true.
func (e *BadPolicyError) Is(target error) bool { return target == ErrBadPolicy }

// ParsePolicy reads a policy name: "allow", "steer" or "deny", in any
// case, surrounding spaces ignored.
func ParsePolicy(s string) (Policy, error) {
	p := Policy(strings.ToLower(strings.TrimSpace(s)))
	if !p.Valid() {
		return "", &BadPolicyError{Policy: s}
	}
	return p, nil
}

// Valid reports whether p is one of the three policies.
func (p Policy) Valid() bool { return p == Allow || p == Steer || p == Deny }

// Kind is the class of access an operation needs.
type Kind uint8

// The kinds, from least to most powerful.
const (
	// Viewing: listing instances, reading events, sessions and files.
	Viewing Kind = iota + 1
	// Spawning: starting and stopping workers.
	Spawning
	// Steering: talking to a running worker (prompt, steer, abort, rpc,
	// exec) — control of what it does.
	Steering
)

// String names the kind ("viewing", "spawning", "steering").
func (k Kind) String() string {
	switch k {
	case Viewing:
		return "viewing"
	case Spawning:
		return "spawning"
	case Steering:
		return "steering"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Operation is something a caller wants to do to a machine: a name for
// messages ("prompt", "spawn", "list", …) and the kind of access it needs.
type Operation struct {
	Name string
	Kind Kind
}

// Common operations; callers may define their own.
var (
	OpView  = Operation{Name: "view", Kind: Viewing}
	OpSpawn = Operation{Name: "spawn", Kind: Spawning}
	OpSteer = Operation{Name: "steer", Kind: Steering}
)

// Permits reports whether p allows op: allow and steer permit viewing and
// spawning, only steer permits steering, deny permits nothing.
func (p Policy) Permits(op Operation) bool {
	switch p {
	case Steer:
		return op.Kind == Viewing || op.Kind == Spawning || op.Kind == Steering
	case Allow:
		return op.Kind == Viewing || op.Kind == Spawning
	}
	return false
}

// ErrPolicyRefused: an operation is not permitted by the machine's policy.
// A *PolicyError carries the details.
var ErrPolicyRefused = errors.New("trust: operation refused by policy")

// PolicyError reports an operation that a machine's policy does not permit
// (errors.Is(err, ErrPolicyRefused)).
type PolicyError struct {
	Identity  identity.Identity
	Policy    Policy
	Operation Operation
}

func (e *PolicyError) Error() string {
	return fmt.Sprintf("trust: %s on %s refused: policy is %q (%s needs %s)",
		e.Operation.Name, e.Identity, e.Policy, e.Operation.Kind, needed(e.Operation.Kind))
}

// needed names the weakest policy that permits kind k.
func needed(k Kind) string {
	switch k {
	case Viewing, Spawning:
		return `"allow" or "steer"`
	case Steering:
		return `"steer"`
	}
	return "a known kind"
}

// Is makes errors.Is(err, ErrPolicyRefused) true.
func (e *PolicyError) Is(target error) bool { return target == ErrPolicyRefused }

// Check returns nil if policy p of machine id permits op, else a
// *PolicyError naming the machine, the policy and the operation.
func Check(id identity.Identity, p Policy, op Operation) error {
	if p.Permits(op) {
		return nil
	}
	return &PolicyError{Identity: id, Policy: p, Operation: op}
}
