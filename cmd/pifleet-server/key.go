package main

import (
	"crypto/ed25519"
	"fmt"
	"path/filepath"
	"time"

	"example.com/pifleet/fleet"
	"example.com/pifleet/transport/auth"
)

// KeyCmd groups the server key commands. The key pair lives in the state
// directory (server.key, mode 0600); the private key never leaves it.
type KeyCmd struct {
	Show   KeyShowCmd   `cmd:"" default:"withargs" help:"Print the server's public key (the value of the agents' --server-key); creates the key pair when there is none yet."`
	Rotate KeyRotateCmd `cmd:"" help:"Replace the server's key. The old key is still proven for --grace, so agents keep connecting until they are given the new one."`
}

// KeyShowCmd is `key` and `key show`.
type KeyShowCmd struct {
	StateDir string `help:"State directory holding the key pair." default:"${default_state_dir}" env:"PIFLEET_STATE_DIR" type:"path"`
	JSONFlag `embed:""`
}

// keyJSON is the --json form of the key commands.
type keyJSON struct {
	Key     string       `json:"key"`
	Retired []retiredKey `json:"retired,omitempty"`
}

type retiredKey struct {
	Key   string    `json:"key"`
	Until time.Time `json:"until"`
}

func describeRing(r *auth.KeyRing) keyJSON {
	out := keyJSON{Key: auth.FormatPublicKey(r.Public())}
	for _, k := range r.Retired {
		out.Retired = append(out.Retired, retiredKey{Key: auth.FormatPublicKey(k.Key.Public().(ed25519.PublicKey)), Until: k.Until})
	}
	return out
}

// Run prints the public key.
func (c *KeyShowCmd) Run(out *Output) error {
	r, err := auth.LoadOrCreate(filepath.Join(c.StateDir, fleet.KeyFile))
	if err != nil {
		return err
	}
	if c.JSON {
		return printJSON(out.Out, describeRing(r))
	}
	_, err = fmt.Fprintln(out.Out, auth.FormatPublicKey(r.Public()))
	return err
}

// KeyRotateCmd is `key rotate`.
type KeyRotateCmd struct {
	StateDir string        `help:"State directory holding the key pair." default:"${default_state_dir}" env:"PIFLEET_STATE_DIR" type:"path"`
	Grace    time.Duration `help:"How long the old key is still proven (0: not at all; agents that trust only it are refused at once)." default:"168h" env:"PIFLEET_KEY_GRACE"`
	JSONFlag `embed:""`
}

// Run rotates the key. A running server proves the new key (and the old
// one, during the grace) from its next handshake on; connections already
// established are not touched.
func (c *KeyRotateCmd) Run(out *Output) error {
	if c.Grace < 0 {
		return fmt.Errorf("--grace %s is negative", c.Grace)
	}
	r, err := auth.Rotate(filepath.Join(c.StateDir, fleet.KeyFile), c.Grace, time.Now())
	if err != nil {
		return err
	}
	if c.JSON {
		if err := printJSON(out.Out, describeRing(r)); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(out.Out, auth.FormatPublicKey(r.Public()))
	}
	if c.Grace > 0 {
		fmt.Fprintf(out.Err, "new key above; the old one is still proven until %s.\n"+
			"Give each agent the new key (--server-key; both may be listed meanwhile) and restart it: its workers keep running.\n",
			time.Now().Add(c.Grace).UTC().Format(time.RFC3339))
	} else {
		fmt.Fprintln(out.Err, "new key above; the old one is no longer proven: agents that trust only it are refused from now on.")
	}
	return nil
}

// publicKeyText is the server's public key as agents are given it.
func publicKeyText(f *fleet.Fleet) string { return auth.FormatPublicKey(f.PublicKey()) }
