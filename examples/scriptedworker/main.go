// Command scriptedworker is a pi-compatible worker: it speaks the subset of
// `pi --mode rpc` (@mariozechner/pi-coding-agent 0.73.1) that pifleet uses,
// with a scripted model instead of an LLM. It needs no pi, no Node, no keys
// and no network, so loopback tests, demos and the quickstart can run
// anywhere.
//
//	scriptedworker --mode rpc [--session <file|id> | --session-dir <dir> | --no-session]
//	               [--provider faux] [--model faux-1] [--thinking <level>]
//	               [-e <extension>]… [--skill <path>]… [--prompt-template <path>]… [--tools a,b]
//
// The model answers each prompt from directive lines exactly like the faux
// provider pifleet's tests load into the real pi (testdata/pi/README.md):
// "say: hi", "bash: ls", "write: f.txt text", "read: f.txt", "think: …",
// "delay: 200", "error: 503 overloaded", "fail: 1 503 overloaded"; without
// a directive it answers "faux: <prompt>". Commands, responses, events and
// their order follow pi 0.73.1 (no agent_settled, as in 0.73.1), and session
// files are real pi v3 JSONL files. Differences from the real pi are listed
// in README.md.
//
// Environment: PI_CODING_AGENT_DIR (settings.json retry settings, default
// session directory), PI_CODING_AGENT_SESSION_DIR, PIFLEET_FAUX_COST,
// PIFLEET_FAUX_CHUNK, PIFLEET_FAUX_DELAY_MS, PIFLEET_FAUX_CONTEXT_WINDOW.
//
// stdin EOF exits 0 at once (like pi, even mid-run); SIGTERM kills running
// tools and exits 143, SIGHUP 129.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
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
	w, err := newWorker(cfg, newEmitter(stdout))
	if err != nil {
		fmt.Fprintf(stderr, "Error: %v\n", err)
		return 1
	}

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		sig := <-sigs
		w.tools.killAll()
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
			// pi exits at once on stdin EOF, even mid-run.
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
