package fleet

import (
	"net"
	"net/http"
	"sync"
)

// endpoints are what the fleet listens on and is reached at: the
// registry's HTTP server and URL, the inbound listener and its address.
// Start sets them, Close takes them to close.
//
// Its lock guards these fields only. It may be taken with Fleet.mu held,
// and takes no other lock.
type endpoints struct {
	mu          sync.Mutex
	listeners   []net.Listener
	httpSrv     *http.Server
	regURL      string
	inboundAddr string
}

// setRegistry records the registry's server (nil when the application
// serves it) and the URL agents fetch bundles from.
func (e *endpoints) setRegistry(srv *http.Server, url string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.httpSrv, e.regURL = srv, url
}

func (e *endpoints) registryURL() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.regURL
}

// addInbound records the inbound listener.
func (e *endpoints) addInbound(ln net.Listener) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.listeners = append(e.listeners, ln)
	e.inboundAddr = ln.Addr().String()
}

func (e *endpoints) inbound() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.inboundAddr
}

// closers returns what Close closes.
func (e *endpoints) closers() ([]net.Listener, *http.Server) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.listeners, e.httpSrv
}
