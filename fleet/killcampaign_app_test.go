//go:build linux

package fleet_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"example.com/pifleet/fleet"
	"example.com/pifleet/transport"
	"example.com/pifleet/transport/trust"
)

// The application's log messages the campaign waits on.
const (
	appStarted   = "campaign app started"
	appDrained   = "campaign app drained"
	appChange    = "change"
	appAction    = "action"
	appDelivered = "delivered"
	appWaiting   = "waiting"
)

// appDelivery is one line of the application's delivery log: a task_done
// the WithTaskDone callback was handed, written and fsynced before the
// callback returned.
type appDelivery struct {
	Key      string `json:"key"`
	Task     string `json:"task"`
	Instance string `json:"instance"`
	Seq      int64  `json:"seq"`
	Status   string `json:"status"`
	Summary  string `json:"summary"`
	// PID is the application process that was handed the report.
	PID int `json:"pid"`
}

// appVerdict is what the application does with a task awaiting review,
// decided from the task's id alone, so that every run of the
// application (a restart after a kill) decides the same: a fifth of the
// tasks is rejected once (a second run, a second task_done), the others
// accepted, half of them stopping the worker (the next task needs a new
// spawn and bundle sync), half keeping it idle for the next task.
func appVerdict(ti fleet.TaskInfo) (reject bool, disposition transport.Disposition) {
	h := fnv.New32a()
	h.Write([]byte(ti.TaskID))
	switch v := h.Sum32() % 10; {
	case v < 2 && ti.Rejects == 0:
		return true, ""
	case v < 6:
		return false, transport.DispositionStop
	default:
		return false, transport.DispositionKeepIdle
	}
}

func init() { campaignApp = runCampaignApp }

// appFlags are the flags of a test application that embeds a fleet of
// one agent (the campaign's and the spawn window's), as their tests
// start them.
type appFlags struct {
	stateDir, keyFile, registry, agent, cwd, logLevel *string
}

// appFlagSet returns the flag set of the application name with the flags
// of appFlags defined; the caller adds its own.
func appFlagSet(name string) (*flag.FlagSet, *appFlags) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	af := &appFlags{
		stateDir: fs.String("state-dir", "", "the server's state directory"),
		keyFile:  fs.String("key-file", "", "the server's key file"),
		registry: fs.String("registry", "", "the bundle registry"),
		agent:    fs.String("agent", "", "NAME=HOST:PORT of the one agent"),
		cwd:      fs.String("cwd", "", "the workers' cwd"),
		logLevel: fs.String("log-level", "info", ""),
	}
	fs.String("log-format", "json", "")
	return fs, af
}

// fleetOptions are the options of the application's fleet: its state
// directory, key and registry, agent a, steer for every peer and the
// tests' fast dialer, then more.
func (af *appFlags) fleetOptions(a fleet.Agent, more ...fleet.Option) []fleet.Option {
	return append([]fleet.Option{fleet.WithStateDir(*af.stateDir), fleet.WithKeyFile(*af.keyFile),
		fleet.WithRegistry(*af.registry, "127.0.0.1:0"), fleet.WithAgents(a), fleet.WithPrompter(trust.Fixed(trust.Steer)), fastDialer}, more...)
}

// runCampaignApp is the application: it keeps workers busy with small
// tracked tasks on one agent, reviews each task that awaits review
// (appVerdict), and records each task_done it is handed in a delivery
// log. It decides from the fleet's state alone, so a restarted
// application carries on where the killed one stopped. With -drain, or
// from SIGUSR1 on, it submits nothing new: it finishes the tasks that are
// open, stops the workers, logs appDrained and exits 0.
func runCampaignApp(args []string) int {
	fs, af := appFlagSet("campaign-app")
	bundles := fs.Int("bundles", 1, "bundles b0…b<n-1> are published; spawn k runs b<k mod n>")
	workers := fs.Int("workers", 2, "workers kept running")
	deliveries := fs.String("deliveries", "", "the delivery log")
	drain := fs.Bool("drain", false, "finish the open tasks, stop the workers and exit")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	level, err := zerolog.ParseLevel(*af.logLevel)
	if err != nil {
		level = zerolog.InfoLevel
	}
	log := zerolog.New(os.Stderr).Level(level).With().Timestamp().Logger()
	fail := func(what string, err error) int {
		log.Error().Err(err).Msg(what)
		return 1
	}
	a, err := fleet.ParseAgent(*af.agent)
	if err != nil {
		return fail("agent", err)
	}
	out, err := openDeliveryLog(*deliveries)
	if err != nil {
		return fail("delivery log", err)
	}
	defer out.Close()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	f, err := fleet.New(af.fleetOptions(a,
		// The fleet's own debug lines would drown the campaign's log.
		fleet.WithLogger(log.Level(max(level, zerolog.InfoLevel)).With().Str("component", "fleet").Logger()),
		fleet.WithTaskDone(func(r fleet.TaskReport) {
			line, _ := json.Marshal(appDelivery{Key: r.Key.String(), Task: r.TaskID, Instance: r.InstanceID, Seq: r.Seq,
				Status: r.Status, Summary: r.Summary, PID: os.Getpid()})
			if _, err := out.Write(append(line, '\n')); err != nil {
				log.Fatal().Err(err).Msg("delivery log") // the report must not count as heard
			}
			if err := out.Sync(); err != nil {
				log.Fatal().Err(err).Msg("delivery log")
			}
			log.Info().Str("key", r.Key.String()).Str("taskId", r.TaskID).Msg(appDelivered)
		}),
	)...)
	if err != nil {
		return fail("new fleet", err)
	}
	defer f.Close()
	sub := f.Subscribe(1 << 14)
	if err := f.Start(ctx); err != nil {
		return fail("start", err)
	}
	log.Info().Bool("drain", *drain).Msg(appStarted)
	d := &appDriver{f: f, log: log, agent: a.Name, cwd: *af.cwd, bundles: *bundles, workers: *workers, drain: *drain}
	tick := time.NewTicker(200 * time.Millisecond) // a failed step is tried again
	defer tick.Stop()
	drainNow := make(chan os.Signal, 1)
	signal.Notify(drainNow, syscall.SIGUSR1)
	for {
		if d.step(ctx) {
			log.Info().Msg(appDrained)
			return 0
		}
		select {
		case c := <-sub.C:
			d.logChange(c)
			for more := true; more; {
				select {
				case c := <-sub.C:
					d.logChange(c)
				default:
					more = false
				}
			}
		case <-tick.C:
		case <-drainNow:
			d.drain = true
			log.Info().Msg("draining")
		case <-ctx.Done():
			return 0
		}
	}
}

// openDeliveryLog opens the delivery log for appending. A line a kill cut
// short (no newline) was written by a callback that never returned: it is
// cut off, and the report comes again.
func openDeliveryLog(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	if keep := bytes.LastIndexByte(b, '\n') + 1; keep != len(b) {
		if err := f.Truncate(int64(keep)); err != nil {
			f.Close()
			return nil, err
		}
	}
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// readDeliveryLog returns the lines of a delivery log.
func readDeliveryLog(path string) ([]appDelivery, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []appDelivery
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var d appDelivery
		if err := json.Unmarshal(sc.Bytes(), &d); err != nil {
			return nil, fmt.Errorf("%s: %q: %w", path, sc.Text(), err)
		}
		out = append(out, d)
	}
	return out, sc.Err()
}

// appDriver is the application's decisions; one step looks at the fleet's
// status and acts on it.
type appDriver struct {
	f                *fleet.Fleet
	log              zerolog.Logger
	agent, cwd       string
	bundles, workers int
	drain            bool
	// waiting is what the last appWaiting line said.
	waiting string
}

// logChange logs the changes the campaign times its kills by.
func (d *appDriver) logChange(c fleet.Change) {
	switch c.Kind {
	case fleet.ChangeEvent:
		return
	case fleet.ChangeSpawnProgress, fleet.ChangeInstanceState, fleet.ChangeTaskDone, fleet.ChangeTaskState:
		d.log.Debug().Str("kind", string(c.Kind)).Str("event", c.Event).Str("to", c.To).Str("instanceId", c.InstanceID).
			Str("taskId", c.TaskID).Msg(appChange)
	}
}

// terminalTask says whether a task's state is one no event leaves.
func terminalTask(state fleet.TaskState) bool { return fleet.TaskTable.IsFinal(state) }

// step makes one round of decisions; it reports true once drained.
func (d *appDriver) step(ctx context.Context) bool {
	st := d.f.Status(ctx)
	established := false
	for _, a := range st.Agents {
		established = established || a.Name == d.agent && a.State == transport.StateEstablished
	}
	if !established {
		return false
	}
	var open []string
	for _, ti := range st.Tasks {
		switch ti.State {
		case fleet.TaskAwaitingReview, fleet.TaskVerifying:
			d.review(ctx, ti)
		}
		if !terminalTask(ti.State) {
			open = append(open, ti.TaskID+"="+string(ti.State))
		}
	}
	live, busy := 0, []string(nil)
	for _, in := range st.Instances {
		if in.Agent != d.agent {
			continue
		}
		switch in.State {
		case fleet.StateStopped, fleet.StateFailed:
			continue
		case fleet.StateAccepted:
			// Accept leaves accepted before it returns: an instance seen
			// there is stuck (the campaign counts it), and keeps no
			// worker busy, so another is spawned.
			busy = append(busy, in.InstanceID+"="+string(in.State))
			continue
		case fleet.StateIdle, fleet.StateDegradedCache:
			if d.drain {
				d.act(ctx, "stop", in.InstanceID, func(ctx context.Context, i *fleet.Instance) error { return i.Stop(ctx) })
			} else {
				d.act(ctx, "submit", in.InstanceID, func(ctx context.Context, i *fleet.Instance) error {
					_, err := i.Submit(ctx, d.prompt(len(st.Tasks)), fleet.PromptOptions{})
					return err
				})
			}
		}
		live++
		busy = append(busy, in.InstanceID+"="+string(in.State))
	}
	if d.drain {
		if live == 0 && len(open) == 0 {
			return true
		}
		if w := fmt.Sprint(open, busy); w != d.waiting {
			d.waiting = w
			d.log.Info().Strs("tasks", open).Strs("instances", busy).Msg(appWaiting)
		}
		return false
	}
	if live < d.workers {
		bundle := "b" + strconv.Itoa(len(st.Instances)%d.bundles)
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		d.log.Info().Str("op", "spawn").Str("bundle", bundle).Msg(appAction)
		_, err := d.f.Spawn(sctx, fleet.SpawnOptions{Agent: d.agent, Cwd: d.cwd, Bundle: bundle})
		cancel()
		if err != nil {
			d.log.Info().Err(err).Str("op", "spawn").Msg("action failed")
		}
	}
	return false
}

// prompt is a small task: a tool call of a few to a few hundred
// milliseconds.
func (d *appDriver) prompt(n int) string {
	return fmt.Sprintf("bash: sleep 0.%03d; echo task-%d", (n*137)%400, n)
}

func (d *appDriver) review(ctx context.Context, ti fleet.TaskInfo) {
	t, err := d.f.Task(ti.TaskID)
	if err != nil {
		return
	}
	reject, disposition := appVerdict(ti)
	op := "accept " + string(disposition)
	if reject {
		op = "reject"
	}
	d.log.Info().Str("op", op).Str("taskId", ti.TaskID).Msg(appAction)
	if reject {
		_, err = t.Reject(ctx, "once more, please")
	} else {
		actx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err = t.Accept(actx, disposition)
		cancel()
	}
	if err != nil {
		d.log.Info().Err(err).Str("op", op).Str("taskId", ti.TaskID).Msg("action failed")
	}
}

func (d *appDriver) act(ctx context.Context, op, id string, fn func(context.Context, *fleet.Instance) error) {
	i, err := d.f.Instance(id)
	if err != nil {
		return
	}
	d.log.Info().Str("op", op).Str("instanceId", id).Msg(appAction)
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := fn(actx, i); err != nil {
		d.log.Info().Err(err).Str("op", op).Str("instanceId", id).Msg("action failed")
	}
}
