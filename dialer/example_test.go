package dialer_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"example.com/pifleet/dialer"
)

// agents is a minimal Directory: a fixed set of agents and the
// connections the dial function made to them.
type agents struct {
	mu    sync.Mutex
	addrs map[string][]string
	conns map[string]net.Conn
}

func (a *agents) Targets() []string {
	return []string{"agent-a"}
}

func (a *agents) Eligible(id string) bool {
	_, ok := a.addrs[id]
	return ok
}

func (a *agents) Addresses(id string) []string { return a.addrs[id] }

func (a *agents) Connected(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.conns[id] != nil
}

// The dialer keeps an agent connected: here one agent listening on
// loopback, dialled over real TCP as soon as the dialer starts.
func Example() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	go func() { // the agent: hold connections until it stops listening
		var held []net.Conn
		for {
			c, err := ln.Accept()
			if err != nil {
				for _, c := range held {
					c.Close()
				}
				return
			}
			held = append(held, c)
		}
	}()

	dir := &agents{
		addrs: map[string][]string{"agent-a": {ln.Addr().String()}},
		conns: map[string]net.Conn{},
	}
	connected := make(chan string, 1)
	dial := func(ctx context.Context, id, addr string) error {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		dir.mu.Lock()
		dir.conns[id] = c // reported by Connected before the dial returns
		dir.mu.Unlock()
		connected <- id
		return nil
	}

	cfg := dialer.DefaultConfig()
	cfg.DialDelay = 0 // dial at once, not 30 s after start
	d, err := dialer.New(cfg, dir, dial)
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()

	fmt.Println("connected:", <-connected)
	cancel()
	if err := <-done; err != nil {
		panic(err)
	}
	s := d.Stats()
	fmt.Printf("dials started %d, succeeded %d\n", s.DialsStarted, s.DialsSucceeded)
	dir.conns["agent-a"].Close()
	// Output:
	// connected: agent-a
	// dials started 1, succeeded 1
}

// The retry delay after successive failures, with the seed's defaults and
// a seeded random source: the first is always MinRetryInterval, and each
// is the previous times a factor in [1, 2).
func ExampleConfig_NextRetryDelay() {
	cfg := dialer.DefaultConfig()
	rng := rand.New(rand.NewPCG(1, 2))
	var delay time.Duration
	for range 8 {
		delay = cfg.NextRetryDelay(delay, rng)
		fmt.Print(delay.Round(time.Millisecond), " ")
	}
	fmt.Println()
	// Output:
	// 1s 1.461s 2.205s 3.152s 5.667s 7.868s 14.313s 19.154s
}

func ExampleConfig_Validate() {
	cfg := dialer.DefaultConfig()
	cfg.MaxRetryInterval = 100 * time.Millisecond
	fmt.Println(cfg.Validate())
	// Output:
	// dialer: config MaxRetryInterval = 100ms: must not be below MinRetryInterval (1s)
}
