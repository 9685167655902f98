package main

import (
	"os"
	"syscall"
	"testing"

	"github.com/rs/zerolog"
)

// The first SIGTERM or SIGINT ends the agent's Run; a second one exits at
// once (128 + the signal's number), whatever the shutdown is doing.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	sigs := make(chan os.Signal, 2)
	done := make(chan struct{})
	cancelled := make(chan struct{})
	exited := make(chan int, 1)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		onSignals(sigs, done, func() { close(cancelled) }, func(code int) { exited <- code }, zerolog.Nop())
	}()
	sigs <- syscall.SIGTERM
	<-cancelled
	select {
	case code := <-exited:
		t.Fatalf("exited (%d) on the first signal", code)
	default:
	}
	sigs <- syscall.SIGINT // the shutdown (done) never ends here
	if code := <-exited; code != 128+int(syscall.SIGINT) {
		t.Errorf("exit code %d", code)
	}
	<-ended
}

// A shutdown that ends before any second signal exits normally.
func TestOneSignalShutsDown(t *testing.T) {
	sigs := make(chan os.Signal, 2)
	done := make(chan struct{})
	cancelled := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		onSignals(sigs, done, func() { close(cancelled) }, func(code int) { t.Errorf("exit(%d)", code) }, zerolog.Nop())
	}()
	sigs <- syscall.SIGTERM
	<-cancelled
	close(done)
	<-ended
}
