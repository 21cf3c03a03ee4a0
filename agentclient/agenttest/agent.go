package agenttest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/clock"
	"github.com/anvilmetal/anvil/steps"
)

// Behavior scripts how the fake agent runs one command or one step.
type Behavior struct {
	// Delay is how long the command stays RUNNING (asynchronous commands)
	// or how long the request takes (synchronous ones).
	Delay time.Duration
	// Fail, when set, makes the command finish FAILED with this error.
	Fail *agentclient.AgentError
	// Result is what the command returns: the <kind>_result of a step, or
	// the command_result of any other command.
	Result any
	// Times limits the behaviour to the next Times runs; zero means every
	// run.
	Times int
	// Busy makes the agent answer 409 "Agent is busy" to the next Busy
	// requests for the command before it accepts one, as IPA does while
	// another command (one the caller does not know of) still runs. The
	// refused requests do not run and do not consume Times.
	Busy int
	// Release, when set, keeps the command RUNNING until it is closed (and
	// Delay has passed): a test that must act while a command runs closes
	// it once it acted, instead of racing a fixed Delay. Only closing the
	// agent cuts the wait short.
	Release <-chan struct{}
}

// AgentConfig configures a fake agent.
type AgentConfig struct {
	// Token is the agent token the agent requires on commands. Empty means
	// the agent has no token yet and accepts any, as IPA does before its
	// lookup.
	Token string
	// Version is the IPA version reported by /v1/status and heartbeats.
	// Empty means "10.0.0".
	Version string
	// HardwareManagers are the managers whose steps the agent offers. Nil
	// means GenericHardwareManager() alone.
	HardwareManagers []HardwareManager
	// CommandDelay is how long asynchronous commands stay RUNNING unless a
	// Behavior says otherwise.
	CommandDelay time.Duration
	// RejectTargetBootMode makes image.install_bootloader reject the
	// target_boot_mode parameter, as agents older than that parameter do.
	RejectTargetBootMode bool
	// Clock paces delays. Nil means the system clock.
	Clock clock.Clock
	// BlockDevices is how many disks the machine has, as the software
	// RAID steps count them (IPA refuses RAID 5 on fewer than 3 and RAID
	// 6 on fewer than 4). Zero means 2.
	BlockDevices int
}

// Execution records one command the agent accepted and ran.
type Execution struct {
	ID      string
	Command string // full name, e.g. "clean.execute_clean_step"
	Params  map[string]any
	// Step is the step of an execute_<kind>_step command, else nil.
	Step *steps.Step
	// Body is the request body exactly as the agent received it, for
	// checks that decoded Params cannot make (the exact text of a
	// number: IPA, in Python, keeps 9007199254740993 and 1.0 as sent).
	Body       []byte
	Status     agentclient.CommandStatus
	Error      *agentclient.AgentError
	StartedAt  time.Time
	FinishedAt time.Time
}

// command is the agent's record of one command.
type command struct {
	res      agentclient.CommandResult
	full     string
	step     *steps.Step
	body     []byte
	started  time.Time
	finished time.Time
	done     chan struct{}
}

// Agent is a fake Ironic Python Agent: an http.Handler serving IPA's REST
// API with IPA's behaviour. Commands go RUNNING then SUCCEEDED, FAILED or
// CLEAN_VERSION_MISMATCH; one runs at a time (409 "Agent is busy"); a
// wrong token gets 401, an unknown extension or command id 404, a malformed
// body or unknown command 400. It records every command it ran. Close stops
// running commands.
type Agent struct {
	clock      clock.Clock
	version    string
	delay      time.Duration
	rejectTBM  bool
	startedAt  float64
	ctx        context.Context
	cancel     context.CancelFunc
	wg         sync.WaitGroup
	finishedCh chan struct{}
	goneCh     chan struct{}

	mu          sync.Mutex
	token       string
	managers    []HardwareManager
	commands    []*command
	byID        map[string]*command
	behaviors   map[string]*Behavior
	partitions  map[string]any
	disks       int
	mdRAID      map[string]any // the software RAID the raid steps built
	gone        bool
	busyAnswers int
}

// NewAgent returns a fake agent.
func NewAgent(cfg AgentConfig) *Agent {
	clk := cfg.Clock
	if clk == nil {
		clk = clock.System()
	}
	ver := cfg.Version
	if ver == "" {
		ver = "10.0.0"
	}
	mgrs := cfg.HardwareManagers
	if mgrs == nil {
		mgrs = []HardwareManager{GenericHardwareManager()}
	}
	disks := cfg.BlockDevices
	if disks <= 0 {
		disks = 2
	}
	ctx, cancel := context.WithCancel(context.Background())
	now := clk.Now()
	return &Agent{
		clock: clk, version: ver, delay: cfg.CommandDelay, rejectTBM: cfg.RejectTargetBootMode,
		startedAt:  float64(now.UnixNano()) / 1e9,
		ctx:        ctx,
		cancel:     cancel,
		finishedCh: make(chan struct{}, 1),
		goneCh:     make(chan struct{}),
		token:      cfg.Token,
		managers:   slices.Clone(mgrs),
		byID:       map[string]*command{},
		behaviors:  map[string]*Behavior{},
		disks:      disks,
	}
}

// Close cancels running commands (they finish FAILED) and waits for them.
func (a *Agent) Close() {
	a.cancel()
	a.wg.Wait()
}

// Version is the IPA version the agent reports.
func (a *Agent) Version() string { return a.version }

// SetToken sets the token the agent requires, as IPA does when its lookup
// returns one.
func (a *Agent) SetToken(token string) {
	a.mu.Lock()
	a.token = token
	a.mu.Unlock()
}

// Token returns the agent's token.
func (a *Agent) Token() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.token
}

// SetBehavior scripts a command by its full name, e.g. "standby.sync".
func (a *Agent) SetBehavior(command string, b Behavior) {
	a.mu.Lock()
	a.behaviors[command] = &b
	a.mu.Unlock()
}

// SetStepBehavior scripts one step of one kind, e.g. (steps.Clean,
// "deploy", "erase_devices").
func (a *Agent) SetStepBehavior(kind steps.Kind, iface, step string, b Behavior) {
	a.SetBehavior(stepKey(kind, iface, step), b)
}

func stepKey(kind steps.Kind, iface, step string) string {
	return string(kind) + ":" + iface + "." + step
}

// SetHardwareManagerVersion changes a manager's version, as an agent
// upgraded behind Ironic's back: steps sent with the old version then end
// in CLEAN_VERSION_MISMATCH. It reports whether the manager exists.
func (a *Agent) SetHardwareManagerVersion(name, version string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i := range a.managers {
		if a.managers[i].Name == name {
			a.managers[i].Version = version
			return true
		}
	}
	return false
}

// HardwareManagerVersion is the version map the agent reports.
func (a *Agent) HardwareManagerVersion() map[string]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.versionsLocked()
}

func (a *Agent) versionsLocked() map[string]string {
	v := make(map[string]string, len(a.managers))
	for _, m := range a.managers {
		v[m.VersionKey] = m.Version
	}
	return v
}

// Executed returns every command the agent accepted, in order, as copies.
func (a *Agent) Executed() []Execution {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]Execution, 0, len(a.commands))
	for _, c := range a.commands {
		e := Execution{ID: c.res.ID, Command: c.full, Params: maps.Clone(c.res.Params), Body: slices.Clone(c.body), Status: c.res.Status, StartedAt: c.started, FinishedAt: c.finished}
		if c.step != nil {
			s := *c.step
			e.Step = &s
		}
		if c.res.Error != nil {
			er := *c.res.Error
			e.Error = &er
		}
		out = append(out, e)
	}
	return out
}

// CommandRuns counts the accepted commands with this full name.
func (a *Agent) CommandRuns(command string) int {
	n := 0
	for _, e := range a.Executed() {
		if e.Command == command {
			n++
		}
	}
	return n
}

// StepRuns counts how many times a step of one kind was started.
func (a *Agent) StepRuns(kind steps.Kind, iface, step string) int {
	n := 0
	for _, e := range a.Executed() {
		if e.Step != nil && e.Command == string(kind)+".execute_"+string(kind)+"_step" && e.Step.Interface == iface && e.Step.Name == step {
			n++
		}
	}
	return n
}

// CommandFinished receives a value when a command finishes (at most one
// pending): IPA forces a heartbeat then.
func (a *Agent) CommandFinished() <-chan struct{} { return a.finishedCh }

// Gone is closed when the agent went away: after power_off, run_image,
// finalize_rescue or lockdown finished. A gone agent drops every
// connection, as a machine that rebooted does.
func (a *Agent) Gone() <-chan struct{} { return a.goneCh }

// IsGone reports whether the agent went away.
func (a *Agent) IsGone() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.gone
}

// lockDown makes the agent go away, as IPA does when it cannot obtain a
// token: it stops serving its API.
func (a *Agent) lockDown() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.gone {
		a.gone = true
		close(a.goneCh)
	}
}

// fault writes IPA's error body.
func fault(w http.ResponseWriter, status int, msg string) {
	code := "Client"
	if status >= 500 {
		code = "Server"
	}
	writeJSON(w, status, map[string]string{"faultcode": code, "faultstring": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// dropConnection closes the client's connection without an answer.
func dropConnection(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			_ = conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

// ServeHTTP serves IPA's API: GET /, GET /v1/, GET [/v1]/status,
// GET [/v1]/commands/, GET [/v1]/commands/{id}, POST [/v1]/commands/.
func (a *Agent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if a.IsGone() {
		dropConnection(w)
		return
	}
	p := r.URL.Path
	if p == "" || p == "/" {
		if r.Method != http.MethodGet {
			fault(w, http.StatusMethodNotAllowed, "405 Method Not Allowed: The method is not allowed for the requested URL.")
			return
		}
		a.serveRoot(w, r)
		return
	}
	if p == "/v1" || p == "/v1/" {
		a.serveRoot(w, r)
		return
	}
	p = strings.TrimPrefix(p, "/v1")
	switch {
	case p == "/status":
		if r.Method != http.MethodGet {
			fault(w, http.StatusMethodNotAllowed, "405 Method Not Allowed: The method is not allowed for the requested URL.")
			return
		}
		writeJSON(w, http.StatusOK, agentclient.AgentStatus{StartedAt: a.startedAt, Version: a.version})
	case p == "/commands" || p == "/commands/":
		switch r.Method {
		case http.MethodGet:
			a.serveList(w, r)
		case http.MethodPost:
			a.serveRun(w, r)
		default:
			fault(w, http.StatusMethodNotAllowed, "405 Method Not Allowed: The method is not allowed for the requested URL.")
		}
	case strings.HasPrefix(p, "/commands/") && !strings.Contains(p[len("/commands/"):], "/"):
		if r.Method != http.MethodGet {
			fault(w, http.StatusMethodNotAllowed, "405 Method Not Allowed: The method is not allowed for the requested URL.")
			return
		}
		a.serveGet(w, r, p[len("/commands/"):])
	default:
		fault(w, http.StatusNotFound, "404 Not Found: The requested URL was not found on the server.")
	}
}

func (a *Agent) serveRoot(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"name":            "OpenStack Ironic Python Agent API",
		"description":     "Fake Ironic Python Agent (Anvil agenttest).",
		"versions":        []map[string]any{{"id": "v1"}},
		"default_version": map[string]any{"id": "v1"},
	})
}

// tokenOK validates the agent_token query parameter.
func (a *Agent) tokenOK(r *http.Request) bool {
	a.mu.Lock()
	tok := a.token
	a.mu.Unlock()
	if tok == "" {
		return true
	}
	return agentclient.TokensEqual(tok, r.URL.Query().Get("agent_token"))
}

func isTrue(s string) bool { return strings.EqualFold(s, "true") }

func (a *Agent) serveList(w http.ResponseWriter, r *http.Request) {
	if !a.tokenOK(r) {
		fault(w, http.StatusUnauthorized, "401 Unauthorized: Token invalid.")
		return
	}
	a.mu.Lock()
	list := make([]agentclient.CommandResult, len(a.commands))
	for i, c := range a.commands {
		list[i] = c.res
	}
	a.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"commands": list})
}

func (a *Agent) serveGet(w http.ResponseWriter, r *http.Request, id string) {
	if !a.tokenOK(r) {
		fault(w, http.StatusUnauthorized, "401 Unauthorized: Token invalid.")
		return
	}
	a.mu.Lock()
	c, ok := a.byID[id]
	a.mu.Unlock()
	if !ok {
		fault(w, http.StatusNotFound, fmt.Sprintf("Not found: Command Result with id %s not found.", id))
		return
	}
	if isTrue(r.URL.Query().Get("wait")) {
		select {
		case <-c.done:
		case <-r.Context().Done():
			return
		}
	}
	a.mu.Lock()
	res := c.res
	a.mu.Unlock()
	writeJSON(w, http.StatusOK, res)
}

// commandSpec describes one command the fake agent knows.
type commandSpec struct {
	async    bool
	required []string
	optional []string
}

// specs returns the command table: the commands Ironic sends, with their
// parameters.
func specs(cmd string) (commandSpec, bool, bool) {
	table := map[string]map[string]commandSpec{
		"clean": {
			"get_clean_steps":    {required: []string{"node", "ports"}},
			"execute_clean_step": {async: true, required: []string{"step", "node", "ports"}, optional: []string{"clean_version"}},
		},
		"deploy": {
			"get_deploy_steps":    {required: []string{"node", "ports"}},
			"execute_deploy_step": {async: true, required: []string{"step", "node", "ports"}, optional: []string{"deploy_version"}},
		},
		"service": {
			"get_service_steps":    {required: []string{"node", "ports"}},
			"execute_service_step": {async: true, required: []string{"step", "node", "ports"}, optional: []string{"service_version"}},
		},
		"image": {
			"install_bootloader": {async: true, required: []string{"root_uuid"}, optional: []string{"efi_system_part_uuid", "prep_boot_part_uuid", "target_boot_mode", "ignore_bootloader_failure"}},
		},
		"standby": {
			"get_partition_uuids": {},
			"power_off":           {async: true},
			"run_image":           {async: true},
			"sync":                {},
		},
		"log": {"collect_system_logs": {}},
		// IPA's finalize_rescue is a synchronous command: it answers
		// SUCCEEDED (or FAILED) at once, then the agent stops serving.
		"rescue": {"finalize_rescue": {optional: []string{"rescue_password", "hashed"}}},
		"system": {"lockdown": {async: true}},
	}
	ext, name, _ := strings.Cut(cmd, ".")
	e, ok := table[ext]
	if !ok {
		return commandSpec{}, false, false
	}
	s, ok := e[name]
	return s, true, ok
}

// serveRun implements POST /v1/commands/ in IPA's order: body, token,
// command name, busy, extension, command, parameters.
func (a *Agent) serveRun(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	var req struct {
		Name   *string         `json:"name"`
		Params json.RawMessage `json:"params"`
	}
	var params map[string]any
	if err != nil || json.Unmarshal(body, &req) != nil || req.Name == nil || len(req.Params) == 0 ||
		json.Unmarshal(req.Params, &params) != nil || params == nil {
		fault(w, http.StatusBadRequest, "400 Bad Request: Missing or invalid name or params")
		return
	}
	if !a.tokenOK(r) {
		fault(w, http.StatusUnauthorized, "401 Unauthorized: Token invalid.")
		return
	}
	full := *req.Name
	ext, name, ok := strings.Cut(full, ".")
	if !ok {
		fault(w, http.StatusBadRequest, "Invalid command: Command name must be of the form <extension>.<name>")
		return
	}
	a.mu.Lock()
	if n := len(a.commands); n > 0 && a.commands[n-1].res.Status == agentclient.StatusRunning {
		busy := a.commands[n-1].res.Name
		a.mu.Unlock()
		fault(w, http.StatusConflict, "Agent is busy: executing command "+busy)
		return
	}
	spec, extOK, cmdOK := specs(full)
	if !extOK {
		a.mu.Unlock()
		fault(w, http.StatusNotFound, fmt.Sprintf("Not found: Extension with id %s not found.", ext))
		return
	}
	if !cmdOK {
		a.mu.Unlock()
		fault(w, http.StatusBadRequest, "Invalid command: Unknown command: "+name)
		return
	}
	var step *steps.Step
	if strings.HasPrefix(name, "execute_") {
		s, perr := stepParam(params)
		if perr != "" {
			a.mu.Unlock()
			fault(w, http.StatusBadRequest, "Invalid command parameters: "+perr)
			return
		}
		step = &s
	}
	if b, key := a.behaviorLocked(full, step); b != nil && b.Busy > 0 {
		b.Busy--
		a.busyAnswers++
		if b.Busy == 0 && b.Times == 0 && b.Delay == 0 && b.Fail == nil && b.Result == nil && b.Release == nil {
			delete(a.behaviors, key)
		}
		a.mu.Unlock()
		fault(w, http.StatusConflict, "Agent is busy: executing command "+full)
		return
	}
	c := &command{
		res:     agentclient.CommandResult{ID: uuid.NewString(), Name: name, Params: params, Status: agentclient.StatusRunning},
		full:    full,
		step:    step,
		body:    body,
		started: a.clock.Now(),
		done:    make(chan struct{}),
	}
	a.commands = append(a.commands, c)
	a.byID[c.res.ID] = c
	beh := a.takeBehaviorLocked(full, step)
	a.mu.Unlock()

	delay := beh.Delay
	if spec.async && delay == 0 {
		delay = a.delay
	}
	if spec.async {
		// Like IPA, answer with the command as it is when the thread
		// starts: RUNNING, unless the caller waits.
		a.mu.Lock()
		started := c.res
		a.mu.Unlock()
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			select {
			case <-a.ctx.Done():
				a.finish(c, nil, &agentclient.AgentError{Type: "CommandExecutionError", Code: 500, Message: "Command execution failed", Details: "agent stopped"}, agentclient.StatusFailed)
				return
			case <-a.clock.After(delay):
			}
			if beh.Release != nil {
				select {
				case <-a.ctx.Done():
					a.finish(c, nil, &agentclient.AgentError{Type: "CommandExecutionError", Code: 500, Message: "Command execution failed", Details: "agent stopped"}, agentclient.StatusFailed)
					return
				case <-beh.Release:
				}
			}
			res, cerr, status := a.run(c, spec, beh)
			a.finish(c, res, cerr, status)
		}()
		if !isTrue(r.URL.Query().Get("wait")) {
			writeJSON(w, http.StatusOK, started)
			return
		}
		select {
		case <-c.done:
		case <-r.Context().Done():
			return
		}
	} else {
		if delay > 0 {
			// The command keeps running when the caller gives up, as
			// in IPA; only closing the agent cuts it short.
			select {
			case <-a.clock.After(delay):
			case <-a.ctx.Done():
			}
		}
		if beh.Release != nil {
			select {
			case <-beh.Release:
			case <-a.ctx.Done():
			}
		}
		res, cerr, status := a.run(c, spec, beh)
		a.finish(c, res, cerr, status)
	}
	a.mu.Lock()
	out := c.res
	a.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

// stepParam validates the step parameter of execute_<kind>_step, as IPA's
// validators do; it returns a reason when the step is unusable.
func stepParam(params map[string]any) (steps.Step, string) {
	raw, ok := params["step"]
	if !ok {
		return steps.Step{}, ""
	}
	b, _ := json.Marshal(raw)
	var s steps.Step
	if _, isObj := raw.(map[string]any); !isObj || json.Unmarshal(b, &s) != nil {
		return steps.Step{}, "step must be an object with interface and step"
	}
	if s.Interface == "" || s.Name == "" {
		return steps.Step{}, "step must name an interface and a step"
	}
	return s, ""
}

// takeBehaviorLocked picks the scripted behaviour for this run, consuming
// one of its Times.
func (a *Agent) takeBehaviorLocked(full string, step *steps.Step) Behavior {
	b, key := a.behaviorLocked(full, step)
	if b == nil {
		return Behavior{}
	}
	out := *b
	if b.Times > 0 {
		b.Times--
		if b.Times == 0 {
			delete(a.behaviors, key)
		}
	}
	out.Times, out.Busy = 0, 0
	return out
}

// behaviorLocked returns the scripted behaviour of a command (the step's
// own script first) and its key, or nil.
func (a *Agent) behaviorLocked(full string, step *steps.Step) (*Behavior, string) {
	key := full
	if step != nil {
		kind := steps.Kind(strings.SplitN(full, ".", 2)[0])
		if _, ok := a.behaviors[stepKey(kind, step.Interface, step.Name)]; ok {
			key = stepKey(kind, step.Interface, step.Name)
		}
	}
	return a.behaviors[key], key
}

// BusyAnswers is how many requests the agent refused with 409 "Agent is
// busy" because a Behavior's Busy count asked it to.
func (a *Agent) BusyAnswers() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.busyAnswers
}

// finish records a command's outcome.
func (a *Agent) finish(c *command, result any, cerr *agentclient.AgentError, status agentclient.CommandStatus) {
	var raw json.RawMessage
	if result != nil {
		raw, _ = json.Marshal(result)
	}
	a.mu.Lock()
	c.res.Status = status
	c.res.Error = cerr
	c.res.Result = raw
	c.finished = a.clock.Now()
	goesAway := status == agentclient.StatusSucceeded && (c.full == agentclient.CmdPowerOff || c.full == agentclient.CmdRunImage ||
		c.full == agentclient.CmdLockdown || c.full == agentclient.CmdFinalizeRescue)
	if goesAway && !a.gone {
		a.gone = true
		close(a.goneCh)
	}
	a.mu.Unlock()
	close(c.done)
	select {
	case a.finishedCh <- struct{}{}:
	default:
	}
}

func execError(details string) *agentclient.AgentError {
	return &agentclient.AgentError{Type: "CommandExecutionError", Code: 500, Message: "Command execution failed", Details: details}
}

// run executes a command's logic and returns its result, error and status.
func (a *Agent) run(c *command, spec commandSpec, beh Behavior) (any, *agentclient.AgentError, agentclient.CommandStatus) {
	ext, name, _ := strings.Cut(c.full, ".")
	params := c.res.Params
	// Python keyword-argument checking.
	allowed := append(slices.Clone(spec.required), spec.optional...)
	if a.rejectTBM && c.full == agentclient.CmdInstallBootloader {
		allowed = slices.DeleteFunc(allowed, func(s string) bool { return s == "target_boot_mode" })
	}
	keys := slices.Sorted(maps.Keys(params))
	for _, k := range keys {
		if !slices.Contains(allowed, k) {
			msg := fmt.Sprintf("%s() got an unexpected keyword argument '%s'", name, k)
			if spec.async {
				return nil, execError(msg), agentclient.StatusFailed
			}
			return nil, &agentclient.AgentError{Type: "TypeError", Code: 500, Message: msg}, agentclient.StatusFailed
		}
	}
	for _, k := range spec.required {
		if _, ok := params[k]; !ok {
			msg := fmt.Sprintf("%s() missing 1 required argument: '%s'", name, k)
			if spec.async {
				return nil, execError(msg), agentclient.StatusFailed
			}
			return nil, &agentclient.AgentError{Type: "TypeError", Code: 500, Message: msg}, agentclient.StatusFailed
		}
	}
	if a.ctx.Err() != nil {
		return nil, execError("agent stopped"), agentclient.StatusFailed
	}
	kind := steps.Kind(ext)
	switch name {
	case "get_clean_steps", "get_deploy_steps", "get_service_steps":
		if beh.Fail != nil {
			return nil, beh.Fail, agentclient.StatusFailed
		}
		a.mu.Lock()
		byMgr := map[string][]steps.Step{}
		for _, m := range a.managers {
			byMgr[m.Name] = slices.Clone(m.stepsOf(kind))
		}
		ver := a.versionsLocked()
		a.mu.Unlock()
		return map[string]any{string(kind) + "_steps": byMgr, "hardware_manager_version": ver}, nil, agentclient.StatusSucceeded
	case "execute_clean_step", "execute_deploy_step", "execute_service_step":
		return a.runStep(kind, c, beh)
	}
	if beh.Fail != nil {
		return nil, beh.Fail, agentclient.StatusFailed
	}
	switch c.full {
	case agentclient.CmdGetPartitionUUIDs:
		a.mu.Lock()
		p := maps.Clone(a.partitions)
		a.mu.Unlock()
		if p == nil {
			p = map[string]any{}
		}
		return p, nil, agentclient.StatusSucceeded
	case agentclient.CmdCollectSystemLogs:
		logs, err := a.systemLogs()
		if err != nil {
			return nil, execError(err.Error()), agentclient.StatusFailed
		}
		return map[string]any{"system_logs": logs}, nil, agentclient.StatusSucceeded
	case agentclient.CmdInstallBootloader:
		if beh.Result != nil {
			return beh.Result, nil, agentclient.StatusSucceeded
		}
		return nil, nil, agentclient.StatusSucceeded
	default:
		if beh.Result != nil {
			return beh.Result, nil, agentclient.StatusSucceeded
		}
		return nil, nil, agentclient.StatusSucceeded
	}
}

// runStep runs execute_<kind>_step: version check, step lookup, scripted
// outcome.
func (a *Agent) runStep(kind steps.Kind, c *command, beh Behavior) (any, *agentclient.AgentError, agentclient.CommandStatus) {
	step := *c.step
	a.mu.Lock()
	current := a.versionsLocked()
	var known bool
	for _, m := range a.managers {
		for _, s := range m.stepsOf(kind) {
			if s.Interface == step.Interface && s.Name == step.Name {
				known = true
			}
		}
	}
	a.mu.Unlock()
	if sent, ok := c.res.Params[string(kind)+"_version"]; ok && sent != nil {
		if !sameVersions(sent, current) {
			return nil, &agentclient.AgentError{
				Type: "VersionMismatch", Code: 409,
				Message: "Hardware managers version mismatch, reload agent with correct version",
				Details: fmt.Sprintf("Current versions: %s, versions used by ironic: %s", jsonText(current), jsonText(sent)),
			}, agentclient.StatusCleanVersionMismatch
		}
	}
	if !known {
		return nil, &agentclient.AgentError{
			Type: "HardwareManagerMethodNotFound", Code: 500,
			Message: "No HardwareManager found to handle method",
			Details: "Could not find method: " + step.Name,
		}, agentclient.StatusFailed
	}
	if kind == steps.Deploy && step.Interface == "deploy" && step.Name == "write_image" {
		if err := writeImageArgs(step.Args); err != nil {
			return nil, err, agentclient.StatusFailed
		}
	}
	if step.Interface == "raid" && beh.Fail == nil && beh.Result == nil {
		res, err := a.raidStep(kind, c.res.Params["node"], step)
		if err != nil {
			return nil, err, agentclient.StatusFailed
		}
		return map[string]any{string(kind) + "_result": res, string(kind) + "_step": step}, nil, agentclient.StatusSucceeded
	}
	if beh.Fail != nil {
		return nil, beh.Fail, agentclient.StatusFailed
	}
	if kind == steps.Deploy && step.Interface == "deploy" && step.Name == "write_image" {
		a.mu.Lock()
		info, _ := step.Args["image_info"].(map[string]any)
		if info["image_type"] == "partition" {
			a.partitions = map[string]any{
				"root uuid":                 uuid.NewString(),
				"efi system partition uuid": uuid.NewString(),
				"partitions":                map[string]any{"root": "/dev/sda2", "efi system partition": "/dev/sda1"},
			}
		} else {
			// A whole-disk image: IPA records the disk's identifier
			// (the MBR's disk signature, hexdump at byte 440) as its
			// root uuid (standby._fix_up_partition_uuids).
			id := uuid.New()
			a.partitions = map[string]any{"root uuid": fmt.Sprintf("0x%02x%02x%02x%02x", id[0], id[1], id[2], id[3])}
		}
		a.mu.Unlock()
	}
	return map[string]any{string(kind) + "_result": beh.Result, string(kind) + "_step": step}, nil, agentclient.StatusSucceeded
}

// writeImageArgs checks the arguments of the in-band deploy.write_image
// step as IPA 2023.1 does: its GenericHardwareManager.write_image(node,
// ports, image_info, configdrive=None) is called with the step's args as
// keyword arguments (a TypeError there becomes a DeploymentError), then
// standby.prepare_image validates image_info (ValidateImageInfo).
func writeImageArgs(args map[string]any) *agentclient.AgentError {
	unexpected := func(msg string) *agentclient.AgentError {
		return &agentclient.AgentError{Type: "DeploymentError", Code: 500, Message: "Deploy step failed",
			Details: "Unexpected exception performing deploy step write_image. TypeError: " + msg}
	}
	for _, k := range slices.Sorted(maps.Keys(args)) {
		if k != "image_info" && k != "configdrive" {
			return unexpected(fmt.Sprintf("write_image() got an unexpected keyword argument '%s'", k))
		}
	}
	info, ok := args["image_info"]
	if !ok {
		return unexpected("write_image() missing 1 required positional argument: 'image_info'")
	}
	return ValidateImageInfo(info)
}

// ValidateImageInfo validates the image_info of a write_image step as IPA
// 2023.1's standby._validate_image_info does, with the same rules in the
// same order and the same error (InvalidCommandParamsError, code 400,
// "Invalid command parameters" and IPA's details): id and urls must be
// present, urls a non-empty list, a checksum present must be a non-empty
// string, an os_hash_algo or os_hash_value present (truthy in Python)
// needs both as non-empty strings, and one of the two checksum forms must
// be given. It returns nil when IPA would accept image_info. Values that
// are not JSON objects fail as Python would on them.
func ValidateImageInfo(imageInfo any) *agentclient.AgentError {
	invalid := func(details string) *agentclient.AgentError {
		return &agentclient.AgentError{Type: "InvalidCommandParamsError", Code: 400, Message: "Invalid command parameters", Details: details}
	}
	info, isMap := imageInfo.(map[string]any)
	switch {
	case imageInfo == nil || (isMap && len(info) == 0) || imageInfo == false:
		// Python's "image_info or {}".
		info = map[string]any{}
	case !isMap:
		switch v := imageInfo.(type) {
		case []any:
			// "'id' not in [...]" is true for a list of anything but "id".
			if !slices.Contains(v, any("id")) {
				return invalid("Image is missing 'id' field.")
			}
			if !slices.Contains(v, any("urls")) {
				return invalid("Image is missing 'urls' field.")
			}
			return &agentclient.AgentError{Type: "DeploymentError", Code: 500, Message: "Deploy step failed",
				Details: "Unexpected exception performing deploy step write_image. TypeError: list indices must be integers or slices, not str"}
		case string:
			if !strings.Contains(v, "id") {
				return invalid("Image is missing 'id' field.")
			}
			if !strings.Contains(v, "urls") {
				return invalid("Image is missing 'urls' field.")
			}
			return &agentclient.AgentError{Type: "DeploymentError", Code: 500, Message: "Deploy step failed",
				Details: "Unexpected exception performing deploy step write_image. TypeError: string indices must be integers"}
		}
		return &agentclient.AgentError{Type: "DeploymentError", Code: 500, Message: "Deploy step failed",
			Details: fmt.Sprintf("Unexpected exception performing deploy step write_image. TypeError: argument of type '%s' is not iterable", pythonType(imageInfo))}
	}
	for _, field := range []string{"id", "urls"} {
		if _, ok := info[field]; !ok {
			return invalid(fmt.Sprintf("Image is missing '%s' field.", field))
		}
	}
	if urls, ok := info["urls"].([]any); !ok || len(urls) == 0 {
		return invalid("Image 'urls' must be a list with at least one element.")
	}
	checksumAvail := false
	if c, ok := info["checksum"]; ok && c != nil {
		if s, isStr := c.(string); !isStr || s == "" {
			return invalid("Image 'checksum' must be a non-empty string.")
		}
		checksumAvail = true
	}
	hashAvail := false
	algo, value := info["os_hash_algo"], info["os_hash_value"]
	if pythonTruthy(algo) || pythonTruthy(value) {
		if s, isStr := algo.(string); !isStr || s == "" {
			return invalid("Image 'os_hash_algo' must be a non-empty string.")
		}
		if s, isStr := value.(string); !isStr || s == "" {
			return invalid("Image 'os_hash_value' must be a non-empty string.")
		}
		hashAvail = true
	}
	if !checksumAvail && !hashAvail {
		return invalid("Image checksum is not available, either the 'checksum' field or the 'os_hash_algo' and 'os_hash_value' fields pair must be set for image verification.")
	}
	return nil
}

// pythonTruthy is Python's truth value of a JSON-decoded value.
func pythonTruthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case float64:
		return x != 0
	case json.Number:
		f, err := x.Float64()
		return err != nil || f != 0
	case string:
		return x != ""
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	return true
}

// pythonType names the Python type a JSON-decoded value becomes.
func pythonType(v any) string {
	switch x := v.(type) {
	case bool:
		return "bool"
	case float64:
		if x == float64(int64(x)) {
			return "int"
		}
		return "float"
	case json.Number:
		if _, err := x.Int64(); err == nil {
			return "int"
		}
		return "float"
	}
	return fmt.Sprintf("%T", v)
}

// sameVersions compares a sent version map with the current one.
func sameVersions(sent any, current map[string]string) bool {
	m, ok := sent.(map[string]any)
	if !ok {
		return false
	}
	cur := make(map[string]any, len(current))
	for k, v := range current {
		cur[k] = v
	}
	return reflect.DeepEqual(m, cur)
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// systemLogs builds a gzip-compressed tar with a journal of the commands
// the agent ran, base64-encoded as IPA sends it.
func (a *Agent) systemLogs() (string, error) {
	var journal strings.Builder
	a.mu.Lock()
	for _, c := range a.commands {
		fmt.Fprintf(&journal, "%s %s %s\n", c.started.UTC().Format(time.RFC3339Nano), c.full, c.res.Status)
	}
	a.mu.Unlock()
	files := map[string]string{"journal": journal.String(), "version": a.version + "\n"}
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	names := slices.Collect(maps.Keys(files))
	sort.Strings(names)
	for _, n := range names {
		if err := tw.WriteHeader(&tar.Header{Name: n, Mode: 0o644, Size: int64(len(files[n])), ModTime: a.clock.Now()}); err != nil {
			return "", err
		}
		if _, err := tw.Write([]byte(files[n])); err != nil {
			return "", err
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	if err := gz.Close(); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}

var _ http.Handler = (*Agent)(nil)
