package scripted

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// Main runs one worker process: args are pi's command line (without the
// program name), commands come from stdin and events go to stdout. It
// returns the exit status: 0 on stdin EOF (like pi, even mid-run), 1 when
// startup fails. It is a process entry point: it installs handlers for
// SIGTERM and SIGHUP that kill running tools and exit the process with
// 143 or 129, as pi does.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "Error: %v\n", err)
		return 1
	}
	if cfg.mode != "rpc" {
		fmt.Fprintln(stderr, "Error: scriptedworker only speaks --mode rpc")
		return 1
	}
	for _, ext := range cfg.extensions {
		if _, err := os.Stat(ext); err != nil {
			fmt.Fprintf(stderr, "Error: Failed to load extension %q: %v\n", ext, err)
			return 1
		}
	}
	if len(cfg.extensions) > 0 {
		fmt.Fprintf(stderr, "scriptedworker: extensions recorded, not run: %s\n", strings.Join(cfg.extensions, ", "))
	}
	out := newEmitter(stdout)
	defer out.close()
	w, err := newWorker(cfg, out)
	if err != nil {
		fmt.Fprintf(stderr, "Error: %v\n", err)
		return 1
	}

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGHUP)
	done := make(chan struct{}) // Main returned: the handler goes too
	defer func() { signal.Stop(sigs); close(done) }()
	go func() {
		var sig os.Signal
		select {
		case sig = <-sigs:
		case <-done:
			return
		}
		w.tools.killAll()
		out.flush()
		if sig == syscall.SIGHUP {
			os.Exit(129)
		}
		os.Exit(143)
	}()

	// Read commands LF-delimited, one trailing CR stripped, like pi; only
	// LF splits (U+2028 inside a JSON string is data).
	in := bufio.NewReaderSize(stdin, 1<<20)
	for {
		line, err := in.ReadString('\n')
		if len(line) > 0 {
			line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
			w.handleLine(line)
		}
		if err != nil {
			// pi exits at once on stdin EOF, even mid-run (what was
			// written so far goes out).
			return 0
		}
	}
}

// config is the command line, pi's flags that matter to a fleet.
type config struct {
	mode            string
	session         string
	sessionDir      string
	noSession       bool
	provider        string
	model           string
	thinking        string
	extensions      []string
	skills          []string
	promptTemplates []string
	tools           []string // nil: pi's defaults
	noTools         bool
}

// valueFlags are pi flags that take a value; anything else starting with
// "-" is a switch. Unknown flags are accepted and ignored, so that the
// worker can be started with the same argv as pi.
var valueFlags = map[string]bool{
	"--mode": true, "--session": true, "--session-dir": true, "--provider": true, "--model": true,
	"--thinking": true, "--api-key": true, "-e": true, "--extension": true, "--skill": true,
	"--prompt-template": true, "--theme": true, "--tools": true, "-t": true, "--system-prompt": true,
	"--append-system-prompt": true, "--models": true, "--fork": true,
}

// quietSwitches are pi switches the worker accepts without comment.
var quietSwitches = map[string]bool{
	"--offline": true, "--no-extensions": true, "-ne": true, "--no-skills": true, "-ns": true,
	"--no-prompt-templates": true, "-np": true, "--no-themes": true, "--no-context-files": true,
	"-nc": true, "--no-builtin-tools": true, "-nbt": true, "--verbose": true,
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	cfg := config{provider: "faux", model: "faux-1"}
	for i := 0; i < len(args); i++ {
		name, value, hasValue := strings.Cut(args[i], "=")
		if !strings.HasPrefix(name, "-") {
			return cfg, fmt.Errorf("unexpected argument %q (messages are sent over RPC)", args[i])
		}
		if valueFlags[name] && !hasValue {
			if i+1 >= len(args) {
				return cfg, fmt.Errorf("flag %s needs a value", name)
			}
			i++
			value = args[i]
		}
		switch name {
		case "--mode":
			cfg.mode = value
		case "--session":
			cfg.session = value
		case "--session-dir":
			cfg.sessionDir = value
		case "--no-session":
			cfg.noSession = true
		case "--provider":
			cfg.provider = value
		case "--model":
			// pi accepts provider/id and id:thinking.
			if p, id, ok := strings.Cut(value, "/"); ok {
				cfg.provider, value = p, id
			}
			if id, level, ok := strings.Cut(value, ":"); ok {
				value, cfg.thinking = id, level
			}
			cfg.model = value
		case "--thinking":
			cfg.thinking = value
		case "-e", "--extension":
			cfg.extensions = append(cfg.extensions, value)
		case "--skill":
			cfg.skills = append(cfg.skills, value)
		case "--prompt-template":
			cfg.promptTemplates = append(cfg.promptTemplates, value)
		case "--tools", "-t":
			cfg.tools = strings.Split(value, ",")
		case "--no-tools", "-nt":
			cfg.noTools = true
		default:
			if quietSwitches[name] || valueFlags[name] {
				continue
			}
			// An unknown flag: skip it, and its value if one follows.
			if !hasValue && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				i++
			}
			fmt.Fprintf(stderr, "scriptedworker: ignoring flag %s\n", name)
		}
	}
	if cfg.thinking != "" && !validThinking(cfg.thinking) {
		return cfg, fmt.Errorf("invalid thinking level %q", cfg.thinking)
	}
	return cfg, nil
}
