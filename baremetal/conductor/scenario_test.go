package conductor_test

// The scenario layer: each file in testdata/scenarios is a script of engine
// commands, each followed by "----" and the output it produces, in the
// style of etcd raft's data-driven tests. A reader learns what the engine
// does from the scripts; go test -run Scenario ./baremetal/conductor/
// -update rewrites the expected outputs after a deliberate change.
//
// A block is one command line (with "# ..." comment lines before it),
// "----", and the expected output up to the next blank line. Commands:
//
//	start key=value...       configure the conductor (first command only;
//	                         max_concurrent_deploy, max_concurrent_clean)
//	enroll n1 key=value...   enroll a fake-hardware node (deploy=fake|direct,
//	                         fail=<op>, image_source=URL, automated_clean=false)
//	manage|provide|inspect|undeploy|abort|adopt|unhold|unrescue n1
//	deploy n1 [steps=iface.name:prio,...]
//	rebuild n1
//	clean n1 steps=iface.name,...
//	rescue n1 [password=...]
//	service n1 steps=iface.name,...
//	maintenance n1 on|off [reason=...]
//	power n1 on|off          ask the engine for a power change
//	hardware n1 power=on|off|fail=<op>|fail=
//	                         change the machine behind the engine's back
//	heartbeat n1             a simulated agent on 127.0.0.1 heartbeats
//	tick 30m                 advance the clock, run the periodic tasks
//	show n1 | history n1 | events
//
// Every verb waits until the engine is idle again and prints the
// transitions, power and maintenance events it caused; events prints every
// event since the last events.
// UUIDs print as the node's name and times as <time>.

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/agentclient/agenttest"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/baremetal/storetest"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/statemachine"
	"github.com/anvilmetal/anvil/steps"
)

var updateScenarios = flag.Bool("update", false, "rewrite the expected output of testdata/scenarios/*.txt")

// scenarioBlock is one command of a script and its expected output.
type scenarioBlock struct {
	comments []string
	cmd      string
	line     int
	want     string
}

// parseScenario splits a script into its blocks.
func parseScenario(t *testing.T, path string) []scenarioBlock {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var blocks []scenarioBlock
	var cur scenarioBlock
	inOutput := false
	sc := bufio.NewScanner(f)
	for ln := 1; sc.Scan(); ln++ {
		line := sc.Text()
		switch {
		case inOutput && line == "":
			blocks, cur, inOutput = append(blocks, cur), scenarioBlock{}, false
		case inOutput:
			cur.want += line + "\n"
		case line == "----":
			if cur.cmd == "" {
				t.Fatalf("%s:%d: ---- without a command", path, ln)
			}
			inOutput = true
		case strings.HasPrefix(line, "#") || (line == "" && cur.cmd == ""):
			cur.comments = append(cur.comments, line)
		case cur.cmd != "":
			t.Fatalf("%s:%d: second command %q before ---- (block of line %d)", path, ln, line, cur.line)
		default:
			cur.cmd, cur.line = line, ln
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur.cmd != "" {
		if !inOutput {
			t.Fatalf("%s:%d: command %q has no ----", path, cur.line, cur.cmd)
		}
		blocks = append(blocks, cur)
	}
	return blocks
}

// formatScenario is the inverse of parseScenario, with outputs replaced.
func formatScenario(blocks []scenarioBlock, got []string) string {
	var b strings.Builder
	for i, blk := range blocks {
		for _, c := range blk.comments {
			b.WriteString(c + "\n")
		}
		b.WriteString(blk.cmd + "\n----\n" + got[i])
		if i < len(blocks)-1 {
			b.WriteString("\n")
		}
	}
	return b.String()
}

func TestScenario(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob(filepath.Join("testdata", "scenarios", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios: %v", err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			t.Parallel()
			blocks := parseScenario(t, path)
			s := &scenario{t: t, agents: map[string]*scenarioAgent{}, names: map[string]string{}}
			got := make([]string, len(blocks))
			for i, blk := range blocks {
				out := s.run(blk.cmd)
				if out != "" && !strings.HasSuffix(out, "\n") {
					out += "\n"
				}
				got[i] = out
				if !*updateScenarios && out != blk.want {
					t.Errorf("%s:%d: %s\ngot:\n%swant:\n%s", path, blk.line, blk.cmd, out, blk.want)
				}
			}
			if *updateScenarios {
				if err := os.WriteFile(path, []byte(formatScenario(blocks, got)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// scenario is the engine a script drives: a conductor on a SQLite store
// and a manual clock, whose periodic tasks run only on tick.
type scenario struct {
	t      *testing.T
	clock  *storetest.ManualClock
	store  baremetal.Store
	c      *conductor.Conductor
	client *agentclient.Client
	// names maps node names to UUIDs; agents holds each node's simulated
	// agent once it heartbeats.
	names  map[string]string
	agents map[string]*scenarioAgent
	hbSeq  int

	mu     sync.Mutex
	events []conductor.Event
	seen   int // events already printed by verbs
	shown  int // events already printed by the events command
}

type scenarioAgent struct {
	agent *agenttest.Agent
	url   string
}

// scenarioFakes is the one place the scenarios construct the fake driver
// implementations.
func scenarioFakes() driver.Bundle { return builtin.Bundle(fake.Config{}) }

// runPeriodic is the one place the scenarios run the engine's periodic
// tasks, in the order Ironic's conductor schedules them.
func runPeriodic(ctx context.Context, c *conductor.Conductor) {
	c.CheckTimeouts(ctx)
	c.SyncPowerStates(ctx)
	c.RecoverPowerFailures(ctx)
}

func (s *scenario) start(args map[string]string) {
	t := s.t
	s.clock = newFakeClock()
	store, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "anvil.db"), sqlstore.Options{Clock: s.clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	s.store = store
	s.client, err = agentclient.NewClient(agentclient.ClientConfig{CommandTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.client.Close)
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware},
		EnabledInterfaces: map[driver.Kind][]string{driver.KindDeploy: {fake.Name, agentdeploy.Name}}})
	if err := reg.Register(scenarioFakes()); err != nil {
		t.Fatal(err)
	}
	if err := reg.RegisterInterface(driver.KindDeploy, agentdeploy.Name, agentdeploy.New(s.client)); err != nil {
		t.Fatal(err)
	}
	opts := conductor.Options{Hostname: "scenario", Clock: s.clock, Workers: 1, Logger: testLogger(t),
		Agent:                       conductor.AgentSettings{Client: s.client, APIURL: "http://127.0.0.1:1"},
		CheckProvisionStateInterval: -1, SyncPowerStateInterval: -1, PowerFailureRecoveryInterval: -1, IntentPollInterval: -1}
	for k, v := range args {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("start %s=%q: want a number", k, v)
		}
		switch k {
		case "max_concurrent_deploy":
			opts.MaxConcurrentDeploy = n
		case "max_concurrent_clean":
			opts.MaxConcurrentClean = n
		default:
			t.Fatalf("start: unknown option %q", k)
		}
	}
	s.c, err = conductor.New(store, reg, opts)
	if err != nil {
		t.Fatal(err)
	}
	cancel := s.c.Subscribe(conductor.WatchFilter{}, func(e conductor.Event) {
		s.mu.Lock()
		s.events = append(s.events, e)
		s.mu.Unlock()
	})
	t.Cleanup(cancel)
	if err := s.c.Launch(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stopConductor(t, s.c, 10*time.Second) })
}

// run executes one command and returns its output.
func (s *scenario) run(line string) string {
	t := s.t
	fields := strings.Fields(line)
	verb, rest := fields[0], fields[1:]
	if s.c == nil {
		var args map[string]string
		if verb == "start" {
			args = kvArgs(rest)
		}
		s.start(args)
		if verb == "start" {
			return ""
		}
	}
	ctx := context.Background()
	if verb == "tick" {
		d, err := time.ParseDuration(rest[0])
		if err != nil {
			t.Fatalf("tick %q: %v", rest[0], err)
		}
		s.clock.Advance(d)
		runPeriodic(ctx, s.c)
		return s.settle()
	}
	if verb == "events" {
		s.settle()
		s.mu.Lock()
		defer s.mu.Unlock()
		var b strings.Builder
		for _, e := range s.events[s.shown:] {
			b.WriteString(s.formatEvent(e) + "\n")
		}
		s.shown = len(s.events)
		return b.String()
	}
	if len(rest) == 0 {
		t.Fatalf("%s: which node?", line)
	}
	name, args := rest[0], kvArgs(rest[1:])
	if verb == "enroll" {
		return s.enroll(name, args)
	}
	uuid, ok := s.names[name]
	if !ok {
		t.Fatalf("%s: node %s was not enrolled", line, name)
	}
	var err error
	switch verb {
	case "show":
		return s.show(name)
	case "history":
		return s.history(uuid)
	case "manage":
		err = s.c.Manage(ctx, uuid)
	case "provide":
		err = s.c.Provide(ctx, uuid)
	case "inspect":
		err = s.c.Inspect(ctx, uuid)
	case "deploy":
		err = s.c.Deploy(ctx, uuid, conductor.DeployOptions{DeploySteps: parseSteps(t, args["steps"])})
	case "rebuild":
		err = s.c.Rebuild(ctx, uuid, conductor.DeployOptions{})
	case "undeploy":
		err = s.c.Undeploy(ctx, uuid)
	case "clean":
		err = s.c.Clean(ctx, uuid, parseSteps(t, args["steps"]), conductor.CleanOptions{})
	case "service":
		err = s.c.Service(ctx, uuid, parseSteps(t, args["steps"]), conductor.ServiceOptions{})
	case "abort":
		err = s.c.Abort(ctx, uuid)
	case "adopt":
		err = s.c.Adopt(ctx, uuid)
	case "unhold":
		err = s.c.Unhold(ctx, uuid)
	case "rescue":
		err = s.c.Rescue(ctx, uuid, args["password"])
	case "unrescue":
		err = s.c.Unrescue(ctx, uuid)
	case "maintenance":
		err = s.c.SetMaintenance(ctx, uuid, rest[1] == "on", args["reason"])
	case "power":
		err = s.c.SetPowerState(ctx, uuid, statemachine.PowerState("power "+rest[1]), 0)
	case "hardware":
		s.hardware(uuid, args)
	case "heartbeat":
		return s.heartbeat(name, uuid)
	default:
		t.Fatalf("unknown command %q", line)
	}
	out := s.settle()
	if err != nil {
		out = "error: " + s.normalise(err.Error()) + "\n" + out
	}
	return out
}

func kvArgs(fields []string) map[string]string {
	args := map[string]string{}
	for _, f := range fields {
		k, v, _ := strings.Cut(f, "=")
		args[k] = v
	}
	return args
}

// parseSteps reads "iface.name:priority,..." (priority optional).
func parseSteps(t *testing.T, list string) []steps.Step {
	if list == "" {
		return nil
	}
	var out []steps.Step
	for _, s := range strings.Split(list, ",") {
		s, prio, _ := strings.Cut(s, ":")
		iface, name, ok := strings.Cut(s, ".")
		if !ok {
			t.Fatalf("step %q: want interface.name", s)
		}
		st := steps.Step{Interface: iface, Name: name, Args: map[string]any{}}
		if prio != "" {
			p, err := strconv.Atoi(prio)
			if err != nil {
				t.Fatalf("step %q priority: %v", s, err)
			}
			st.Priority = p
		}
		out = append(out, st)
	}
	return out
}

func (s *scenario) enroll(name string, args map[string]string) string {
	n := &baremetal.Node{Name: name, Driver: builtin.FakeHardware, DriverInfo: map[string]any{},
		InstanceInfo: map[string]any{"image_source": "http://images.example/img.qcow2", "image_checksum": "0123456789abcdef0123456789abcdef"}}
	if d := args["driver"]; d != "" {
		n.Driver = d
	}
	if d := args["deploy"]; d != "" {
		n.DeployInterface = d
	}
	if f := args["fail"]; f != "" {
		n.DriverInfo[fake.FailKey] = f
	}
	if img := args["image_source"]; img != "" {
		n.InstanceInfo["image_source"] = img
	}
	if args["automated_clean"] == "false" {
		n.AutomatedClean = new(false)
	}
	got, err := s.c.Enroll(context.Background(), n)
	if err != nil {
		return "error: " + s.normalise(err.Error()) + "\n"
	}
	s.names[name] = got.UUID
	return s.settle() + s.show(name)
}

// hardware changes the fake machine behind the engine's back.
func (s *scenario) hardware(uuid string, args map[string]string) {
	ctx := context.Background()
	n, err := s.store.GetNode(ctx, uuid)
	if err != nil {
		s.t.Fatal(err)
	}
	if p, ok := args["power"]; ok {
		n.DriverInternalInfo = ensure(n.DriverInternalInfo)
		n.DriverInternalInfo[fake.PowerStateKey] = "power " + p
	}
	if f, ok := args["fail"]; ok {
		n.DriverInfo = ensure(n.DriverInfo)
		if f == "" {
			delete(n.DriverInfo, fake.FailKey)
		} else {
			n.DriverInfo[fake.FailKey] = f
		}
	}
	if err := s.store.UpdateNode(ctx, n, ""); err != nil {
		s.t.Fatal(err)
	}
}

func ensure(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// heartbeat sends a heartbeat from the node's simulated agent, started on
// 127.0.0.1 at the first heartbeat, and waits until the engine recorded
// it (a heartbeat in a state that takes none is dropped).
func (s *scenario) heartbeat(name, uuid string) string {
	a := s.agents[name]
	if a == nil {
		agent := agenttest.NewAgent(agenttest.AgentConfig{})
		srv := httptest.NewServer(agent)
		s.t.Cleanup(srv.Close)
		s.t.Cleanup(agent.Close)
		a = &scenarioAgent{agent: agent, url: srv.URL}
		s.agents[name] = a
	}
	s.hbSeq++
	at := s.clock.Now().Add(time.Duration(s.hbSeq) * time.Microsecond).UTC()
	stamp := at.Format(agentclient.LastHeartbeatLayout)
	err := s.c.AgentBackend().RecordHeartbeat(context.Background(),
		agentclient.Heartbeat{NodeUUID: uuid, CallbackURL: a.url, AgentVersion: a.agent.Version(), ReceivedAt: at})
	if err != nil {
		return "error: " + s.normalise(err.Error()) + "\n"
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		n, err := s.store.GetNode(context.Background(), uuid)
		if err != nil {
			s.t.Fatal(err)
		}
		if n.DriverInternalInfo[driver.InternalAgentLastHeartbeat] == stamp {
			return s.settle()
		}
		time.Sleep(time.Millisecond)
	}
	return "heartbeat dropped\n" + s.settle()
}

// settle waits until no node is locked or has an intent pending and no
// event arrived for a few polls, then returns the transitions published
// since the last call (with the power and maintenance events: the step
// events only show in events).
func (s *scenario) settle() string {
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	quiet, lastCount := 0, -1
	for quiet < 3 {
		if time.Now().After(deadline) {
			s.t.Fatalf("the engine never settled")
		}
		time.Sleep(2 * time.Millisecond)
		nodes, err := s.store.ListNodes(ctx, baremetal.NodeFilter{}, baremetal.Page{})
		if err != nil {
			s.t.Fatal(err)
		}
		busy := slices.ContainsFunc(nodes, func(n *baremetal.Node) bool {
			return n.Reservation != "" || n.TargetPowerState != "" || n.DriverInternalInfo["anvil_intent"] != nil
		})
		s.mu.Lock()
		count := len(s.events)
		s.mu.Unlock()
		if busy || count != lastCount {
			quiet, lastCount = 0, count
			continue
		}
		quiet++
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for _, e := range s.events[s.seen:] {
		if e.Type != conductor.EventStepStart && e.Type != conductor.EventStepEnd && e.Type != conductor.EventNodeEnrolled {
			b.WriteString(s.formatEvent(e) + "\n")
		}
	}
	s.seen = len(s.events)
	return b.String()
}

func (s *scenario) formatEvent(e conductor.Event) string {
	out := e.NodeName + ": "
	switch e.Type {
	case conductor.EventTransition:
		out += fmt.Sprintf("%s -> %s (%s)", e.From, e.To, e.Trigger)
		if e.Target != "" {
			out += " target " + string(e.Target)
		}
	case conductor.EventStepStart, conductor.EventStepEnd:
		out += fmt.Sprintf("%s %s %s", e.Type, e.StepKind, e.Step)
	case conductor.EventPower:
		out += fmt.Sprintf("power %q", e.PowerState)
	case conductor.EventBootStage:
		out += fmt.Sprintf("boot stage %q: %s", e.BootStage, e.Detail)
	default:
		out += fmt.Sprintf("%s changed in %s", e.Type, e.To)
	}
	if e.Error != "" {
		out += ": " + s.normalise(e.Error)
	}
	return out
}

func (s *scenario) show(name string) string {
	n, err := s.store.GetNode(context.Background(), s.names[name])
	if err != nil {
		s.t.Fatal(err)
	}
	out := fmt.Sprintf("%s: state %s", name, n.ProvisionState)
	if n.TargetProvisionState != "" {
		out += " target " + string(n.TargetProvisionState)
	}
	power := n.PowerState
	if power == "" {
		power = "unknown"
	}
	out += fmt.Sprintf(" power %q deploy %s", power, n.DeployInterface)
	if n.Maintenance {
		out += fmt.Sprintf(" maintenance (reason %q fault %q)", s.normalise(n.MaintenanceReason), n.Fault)
	}
	if n.LastError != "" {
		out += "\n  last_error: " + s.normalise(n.LastError)
	}
	return out + "\n"
}

func (s *scenario) history(uuid string) string {
	hist, err := s.store.ListHistory(context.Background(), uuid, 0)
	if err != nil {
		s.t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range hist {
		fmt.Fprintf(&b, "%s %s: %s\n", e.Severity, e.EventType, s.normalise(e.Event))
	}
	return b.String()
}

var (
	scenarioUUID = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	scenarioTime = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?`)
	scenarioURL  = regexp.MustCompile(`http://127\.0\.0\.1:\d+`)
)

// normalise replaces what changes from run to run: UUIDs by node names,
// times and the agents' loopback URLs by placeholders.
func (s *scenario) normalise(text string) string {
	text = scenarioUUID.ReplaceAllStringFunc(text, func(u string) string {
		for name, id := range s.names {
			if id == u {
				return name
			}
		}
		return "<uuid>"
	})
	text = scenarioTime.ReplaceAllString(text, "<time>")
	return scenarioURL.ReplaceAllString(text, "<agent>")
}

// TestScenarioFilesRoundTrip checks that -update rewrites a script to
// itself when nothing changed: the parser keeps every comment, command
// and expected output.
func TestScenarioFilesRoundTrip(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob(filepath.Join("testdata", "scenarios", "*.txt"))
	for _, path := range files {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		blocks := parseScenario(t, path)
		wants := make([]string, len(blocks))
		for i, b := range blocks {
			wants[i] = b.want
		}
		if got := formatScenario(blocks, wants); got != string(raw) {
			t.Errorf("%s: formatting the parsed script changes it:\n%s", path, got)
		}
	}
}
