package fleet

import (
	"context"
	"net/netip"
	"slices"
	"time"

	"example.com/pifleet/transport/identity"
)

func (f *Fleet) discoverTailnet() {
	defer f.wg.Done()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-f.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(f.ctx, identity.DefaultTimeout)
		st, err := f.cfg.Tailnet.Status(ctx)
		cancel()
		if err != nil {
			f.log.Warn().Err(err).Msg("tailnet discovery")
		} else {
			f.addTailnetPeers(st)
		}
		t.Reset(f.cfg.TailnetInterval)
	}
}

func (f *Fleet) addTailnetPeers(st identity.Status) {
	var changed []string
	f.mu.lockAgents()
	for _, p := range st.Peers {
		ip, ok := p.IPv4()
		name := p.Machine()
		if !ok || !p.Online || name == "" {
			continue
		}
		addr := netip.AddrPortFrom(ip, uint16(f.cfg.TailnetPort)).String()
		a := f.agents[name]
		switch {
		case a == nil:
			f.setDirLocked(func() { f.agents[name] = newAgentState(name, []string{addr}, sourceTailnet) })
			f.agentsChangedLocked()
		case a.source == sourceTailnet || a.source == sourceRestored:
			if slices.Equal(a.addrs, []string{addr}) {
				continue
			}
			f.setDirLocked(func() { a.addrs, a.source = []string{addr}, sourceTailnet })
		default:
			continue // the static directory wins
		}
		changed = append(changed, name)
	}
	f.mu.Unlock()
	for _, name := range changed {
		f.dial.Updated(name)
	}
}
