//go:build unix

package shim

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"

	"github.com/rs/zerolog"
)

// The descriptors through which Start talks to a new shim process.
const (
	configFD = 3 // the agent writes one JSON Config, then closes it
	readyFD  = 4 // the shim writes one readiness line, then closes it
)

// maxConfigBytes bounds the configuration a shim reads.
const maxConfigBytes = 16 << 20

// readyLine is the single JSON line a shim writes on its readiness pipe.
type readyLine struct {
	Ready *Ready       `json:"ready,omitempty"`
	Error *RemoteError `json:"error,omitempty"`
}

// Main is the shim process's entry point; the agent binary exposes it as a
// hidden subcommand and exits with its result:
//
//	case "shim": os.Exit(shim.Main(os.Args[2:]))
//
// It takes no arguments. Its configuration arrives as JSON on fd 3, and it
// reports readiness (or why it could not start) as one JSON line on fd 4;
// see "Command-line contract" in the package documentation. It logs JSON
// to stderr. SIGTERM and SIGINT stop the worker and the shim; SIGHUP is
// ignored. It returns 0 after a normal end, 1 when it could not start, 2
// when it was not started as a shim.
func Main(args []string) int {
	if len(args) != 0 {
		fmt.Fprintf(os.Stderr, "shim: unexpected arguments %q: a shim reads its configuration from fd %d\n", args, configFD)
		return 2
	}
	if !isPipe(configFD) || !isPipe(readyFD) {
		fmt.Fprintf(os.Stderr, "shim: fds %d and %d must be pipes (the agent starts shims with shim.Start)\n", configFD, readyFD)
		return 2
	}
	// A shim relays one worker's pipes: a second P buys it no throughput,
	// only idle threads that spin and wake one another on every line
	// (about 15% of its CPU per prompt, measured).
	runtime.GOMAXPROCS(1)
	// Neither descriptor may leak into the worker.
	syscall.CloseOnExec(configFD)
	syscall.CloseOnExec(readyFD)
	readyFile := os.NewFile(readyFD, "shim-ready")
	var reportOnce sync.Once
	report := func(l readyLine) (err error) {
		reportOnce.Do(func() {
			err = json.NewEncoder(readyFile).Encode(l)
			readyFile.Close()
		})
		return err
	}
	log := zerolog.New(os.Stderr).With().Timestamp().Int("shimPid", os.Getpid()).Logger()

	cfgFile := os.NewFile(configFD, "shim-config")
	var cfg Config
	err := json.NewDecoder(io.LimitReader(cfgFile, maxConfigBytes)).Decode(&cfg)
	cfgFile.Close()
	if err != nil {
		err = &ConfigError{"configuration", err.Error()}
		log.Error().Err(err).Msg("shim cannot start")
		report(readyLine{Error: &RemoteError{Code: CodeConfig, Message: err.Error()}})
		return 1
	}
	cfg.Logger = log.With().Str("instance", cfg.InstanceID).Logger()

	signal.Ignore(syscall.SIGHUP)
	sigCtx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx, cancel := context.WithCancel(sigCtx)
	defer cancel()
	cfg.OnReady = func(r Ready) {
		if err := report(readyLine{Ready: &r}); err != nil {
			// Nobody reads the readiness pipe: the agent that started this
			// shim died before it learned of the worker, and only a record
			// it may or may not have kept could find it. A worker nobody
			// knows of would run forever; it is stopped instead.
			cfg.Logger.Warn().Err(err).Msg("the agent that started this shim is gone; stopping the worker")
			cancel()
		}
	}
	if err := Serve(ctx, cfg); err != nil {
		cfg.Logger.Error().Err(err).Msg("shim failed")
		report(readyLine{Error: &RemoteError{Code: errorCode(err), Message: err.Error()}})
		return 1
	}
	return 0
}

// isPipe reports whether fd is open on a pipe, as Start passes them. (A Go
// program started without them may have fd 3 open on something of its
// runtime's, such as an epoll descriptor.)
func isPipe(fd int) bool {
	var st syscall.Stat_t
	return syscall.Fstat(fd, &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFIFO
}
