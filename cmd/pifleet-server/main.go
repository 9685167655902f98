// Command pifleet-server is the orchestrator side of pifleet: it publishes
// bundles into a registry directory, serves them, drives agents through the
// fleet SDK, and offers a local control API (package fleet/controlapi) that
// its own client commands use.
//
//	pifleet-server bundle publish --registry DIR --name NAME SRC
//	pifleet-server bundle list --registry DIR
//	pifleet-server bundle show --registry DIR NAME
//	pifleet-server serve --state-dir DIR --registry DIR --agent NAME=HOST:PORT … [--trust NAME=POLICY] [--api ADDR]
//	pifleet-server install --systemd | --launchd [--print] -- SERVE-FLAGS… [--ui 127.0.0.1:9791]
//	pifleet-server key | key rotate [--grace 168h]
//	pifleet-server status | tasks | watch | doctor | sessions       [--json]
//	pifleet-server spawn --agent NAME --cwd DIR --bundle NAME | spawn --from-session REF [--attach]
//	pifleet-server prompt INSTANCE TEXT [--wait] [--task]
//	pifleet-server steer|abort|stop|output INSTANCE … | logs [-f] INSTANCE
//	pifleet-server diff INSTANCE [--ref REF] [--staged] [--stat] | cat INSTANCE PATH | ls INSTANCE [PATH] | grep INSTANCE PATTERN [--glob G]
//	pifleet-server accept TASK [--disposition stop|keep_idle]
//	pifleet-server reject TASK FEEDBACK
//	pifleet-server trust list | trust set MACHINE allow|steer|deny | retry AGENT
//	pifleet-server rebundle INSTANCE BUNDLE | tools INSTANCE a,b | model INSTANCE provider/id
//	pifleet-server ui [--no-open] | ui answer REQUEST VALUE
//	pifleet-server sessions [--machine M] [--kind baseline|task|scratch] | sessions search QUERY [--machine M] [--cwd DIR]
//	pifleet-server baseline create --agent NAME --cwd DIR --bundle NAME [--prompt TEXT] [--repo NAME]
//	pifleet-server resume SESSION [--attach] [--bundle NAME] [--machine M]
//	pifleet-server mcp [--http 127.0.0.1:PORT]
//	pifleet-server pi-extension [--install]
//
// The client commands find the server with --api (PIFLEET_API; default the
// unix socket of the default state directory). Every flag can also be set
// with a PIFLEET_* environment variable; see --help.
package main

import (
	"os"
	"path/filepath"

	"example.com/pifleet/internal/cli"
	"github.com/alecthomas/kong"
)

// CLI is the whole command line. A command is a field: adding one is adding
// a struct (with a Run method) in its own file and a field here.
type CLI struct {
	Globals

	Bundle  BundleCmd  `cmd:"" help:"Publish and inspect bundles in a registry directory."`
	Serve   ServeCmd   `cmd:"" help:"Run the fleet, the bundle registry and the control API."`
	Install InstallCmd `cmd:"" help:"Install a service (systemd user unit or launchd agent) that runs serve."`
	Key     KeyCmd     `cmd:"" help:"Print or rotate the server's key (the one agents are given with --server-key)."`

	Status   StatusCmd   `cmd:"" group:"Client" help:"Show agents, instances and tasks."`
	Spawn    SpawnCmd    `cmd:"" group:"Client" help:"Spawn a worker; prints its instance id."`
	Prompt   PromptCmd   `cmd:"" group:"Client" help:"Send a prompt (or, with --task, a tracked task) to an instance."`
	Steer    SteerCmd    `cmd:"" group:"Client" help:"Queue a message after the worker's current turn."`
	Abort    AbortCmd    `cmd:"" group:"Client" help:"Interrupt an instance's run."`
	Stop     StopCmd     `cmd:"" group:"Client" help:"Stop an instance's worker."`
	Output   OutputCmd   `cmd:"" group:"Client" help:"Show the transcript of an instance's latest events, and its last message."`
	Logs     LogsCmd     `cmd:"" group:"Client" help:"Print a worker's transcript; with -f, follow it live."`
	Diff     DiffCmd     `cmd:"" group:"Review" help:"Show git diff of an instance's working tree."`
	Cat      CatCmd      `cmd:"" group:"Review" help:"Print a file of an instance's working tree."`
	Ls       LsCmd       `cmd:"" group:"Review" help:"List a directory of an instance's working tree."`
	Grep     GrepCmd     `cmd:"" group:"Review" help:"Search an instance's working tree."`
	Tasks    TasksCmd    `cmd:"" group:"Client" help:"List the tracked tasks."`
	Accept   AcceptCmd   `cmd:"" group:"Client" help:"Accept a task that awaits review."`
	Reject   RejectCmd   `cmd:"" group:"Client" help:"Send a task back with feedback."`
	Trust    TrustCmd    `cmd:"" group:"Client" help:"List or set machines' trust policies."`
	Retry    RetryCmd    `cmd:"" group:"Client" help:"Dial an agent now (after a trust change, or once it is back up), without waiting for its backoff."`
	Watch    WatchCmd    `cmd:"" group:"Client" help:"Print state changes as they happen."`
	Rebundle RebundleCmd `cmd:"" group:"Client" help:"Switch a running instance to another bundle."`
	Tools    ToolsCmd    `cmd:"" group:"Client" help:"Set an instance's active tools."`
	Model    ModelCmd    `cmd:"" group:"Client" help:"Switch, pin or unpin an instance's model."`
	UI       UICmd       `cmd:"" name:"ui" group:"Client" help:"Log a browser into the web page (serve --ui), or answer worker dialogs."`
	Doctor   DoctorCmd   `cmd:"" group:"Client" help:"Check tailscale, every agent and the registry; non-zero exit on failure."`
	Sessions SessionsCmd `cmd:"" group:"Client" help:"List the agents' sessions (baselines flagged stale), or search their contents."`
	Baseline BaselineCmd `cmd:"" group:"Client" help:"Create baseline sessions."`
	Resume   ResumeCmd   `cmd:"" group:"Client" help:"Start a worker on a session of the registry; prints its instance id."`

	Version    cli.VersionCmd    `cmd:"" help:"Print the version: module version, VCS revision, Go version, platform."`
	Completion cli.CompletionCmd `cmd:"" help:"Print a shell completion script: bash, zsh or fish."`
	Deliver    DeliverCmd        `cmd:"" group:"Client" help:"Deliver an isolated task's work: as a branch, a patch, or merged."`
	Exec       ExecCmd           `cmd:"" group:"Client" help:"Run a command on an agent's machine or in a worker's tree (tests, builds); exits with its status."`

	MCP         MCPCmd         `cmd:"" name:"mcp" group:"Orchestrating LLMs" help:"Serve the fleet's tools to an MCP client (stdio; or streamable HTTP with --http)."`
	PiExtension PiExtensionCmd `cmd:"" name:"pi-extension" group:"Orchestrating LLMs" help:"Write the pi extension that gives pi the fleet's tools and print its path (--install: into pi's extensions directory)."`
}

// Globals and Output are the shared CLI plumbing (internal/cli).
type (
	Globals = cli.Globals
	Output  = cli.Output
)

func main() {
	os.Exit(run(os.Args[1:], cli.Std()))
}

// run parses args, runs the chosen command and returns the exit status.
func run(args []string, out *Output) int {
	var c CLI
	return cli.Run("pifleet-server", "Orchestrate fleets of pi coding-agent workers.", &c, &c.Globals, args, out,
		kong.Vars{"default_registry": defaultRegistry()},
		kong.Vars(apiVars(stateDirFromEnv())))
}

// stateDirFromEnv is the server's state directory as the environment
// names it (PIFLEET_STATE_DIR, serve's --state-dir), or the default: the
// client commands find the control socket and token there.
func stateDirFromEnv() string {
	if dir := os.Getenv("PIFLEET_STATE_DIR"); dir != "" {
		return dir
	}
	return defaultStateDir()
}

// defaultRegistry is the registry root of the TypeScript server, so both
// can publish into and serve the same directory.
func defaultRegistry() string {
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(".pi", "agent", "fleet", "bundles")
	}
	return filepath.Join(home, ".pi", "agent", "fleet", "bundles")
}
