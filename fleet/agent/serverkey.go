package agent

import (
	"crypto/ed25519"
	"fmt"
	"path/filepath"
	"slices"

	"example.com/pifleet/transport/auth"
)

// Files of the agent's state directory that hold keys.
const (
	// AgentKeyFile is the agent's own private key (mode 0600), created on
	// first start; agents that dial in prove it to the server.
	AgentKeyFile = "agent.key"
	// TrustedServerKeysFile holds the server key trusted on first use
	// (Config.TrustFirstServerKey), one key a line. Delete it to trust
	// the next server's key instead.
	TrustedServerKeysFile = "server-keys"
)

// PublicKey returns the agent's public key.
func (a *Agent) PublicKey() ed25519.PublicKey { return a.key.Public().(ed25519.PublicKey) }

// trustedServerKeys returns the configured keys and, under trust on first
// use, the one learnt.
func (a *Agent) trustedServerKeys() ([]ed25519.PublicKey, error) {
	keys := slices.Clone(a.cfg.ServerKeys)
	if a.cfg.TrustFirstServerKey {
		learnt, err := auth.ReadPublicKeys(filepath.Join(a.cfg.StateDir, TrustedServerKeysFile))
		if err != nil {
			return nil, err
		}
		keys = append(keys, learnt...)
	}
	return keys, nil
}

// learnServerKey stores the key a server proved on the first connection
// under trust on first use. Two first connections racing: the first one
// stored wins, and the other must have proved the same key.
func (a *Agent) learnServerKey(k ed25519.PublicKey) error {
	a.learnMu.Lock()
	defer a.learnMu.Unlock()
	path := filepath.Join(a.cfg.StateDir, TrustedServerKeysFile)
	learnt, err := auth.ReadPublicKeys(path)
	if err != nil {
		return err
	}
	if len(learnt) > 0 {
		if auth.ContainsKey(learnt, k) {
			return nil
		}
		return fmt.Errorf("%w: another key (%s) was trusted on first use meanwhile", auth.ErrUntrustedKey, auth.FormatPublicKey(learnt[0]))
	}
	if err := auth.WritePublicKeys(path, []ed25519.PublicKey{k}); err != nil {
		return err
	}
	a.log.Warn().Str("key", auth.FormatPublicKey(k)).Str("file", path).Msg("server key trusted on first use; only this key is obeyed from now on")
	return nil
}
