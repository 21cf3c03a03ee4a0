package clusterlab

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/console"
	"github.com/anvilmetal/anvil/console/ipmisol"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/plugins/ipmi/ipmitool"
)

// Process is one labconductor OS process.
type Process struct {
	Host     string
	AgentAPI string
	cmd      *exec.Cmd
	exited   chan struct{}
}

// ProcessConfig says how to start labconductor processes.
type ProcessConfig struct {
	// Binary is the labconductor executable.
	Binary string
	// Prefix are arguments placed before the conductor flags (a program
	// that re-executes itself as a conductor names its mode here).
	Prefix []string
	// DSN, LabURL and Args (extra flags such as timers) are passed on.
	DSN    string
	LabURL string
	Args   []string
	// Stderr receives the processes' logs; nil discards them.
	Stderr io.Writer
}

// StartProcess starts a labconductor named host and waits until it serves.
func StartProcess(ctx context.Context, cfg ProcessConfig, host string) (*Process, error) {
	args := append(append(append([]string(nil), cfg.Prefix...), "-dsn", cfg.DSN, "-host", host, "-lab", cfg.LabURL), cfg.Args...)
	cmd := exec.Command(cfg.Binary, args...)
	cmd.Stderr = cfg.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("clusterlab: starting %s: %w", host, err)
	}
	p := &Process{Host: host, cmd: cmd, exited: make(chan struct{})}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if url, ok := strings.CutPrefix(sc.Text(), "READY "); ok {
				ready <- url
			}
		}
	}()
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	select {
	case url := <-ready:
		p.AgentAPI = url
		return p, nil
	case <-p.exited:
		return nil, fmt.Errorf("clusterlab: conductor %s exited before serving", host)
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-p.exited
		return nil, ctx.Err()
	}
}

// Kill SIGKILLs the process and waits for it to be gone.
func (p *Process) Kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// Stop asks the process to stop gracefully (SIGTERM), killing it after
// timeout.
func (p *Process) Stop(timeout time.Duration) {
	_ = p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.exited:
	case <-time.After(timeout):
		p.Kill()
	}
}

// Alive reports whether the process still runs.
func (p *Process) Alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Plugin asks the conductor for the status of its fake plugin (a
// conductor started with -plugin-dir).
func (p *Process) Plugin(ctx context.Context) (PluginStatus, error) {
	var st PluginStatus
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.AgentAPI+"/lab/plugin", nil)
	if err != nil {
		return st, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, fmt.Errorf("clusterlab: plugin status of %s: %w", p.Host, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("clusterlab: plugin status of %s: %s", p.Host, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return st, fmt.Errorf("clusterlab: plugin status of %s: %w", p.Host, err)
	}
	return st, nil
}

// Console asks the conductor what ConsoleInfo says of node (its UUID)
// and whether its own process runs the console (ConsoleStatus.PID), for
// a conductor started with -ipmi-console.
func (p *Process) Console(ctx context.Context, node string) (ConsoleStatus, error) {
	var st ConsoleStatus
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.AgentAPI+"/lab/console/"+node, nil)
	if err != nil {
		return st, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, fmt.Errorf("clusterlab: console of %s on %s: %w", node, p.Host, err)
	}
	defer resp.Body.Close()
	// A status or an error text: 64 KiB is plenty.
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return st, fmt.Errorf("clusterlab: console of %s on %s: %w", node, p.Host, err)
	}
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("clusterlab: console of %s on %s: %s: %s", node, p.Host, resp.Status, strings.TrimSpace(string(body)))
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return st, fmt.Errorf("clusterlab: console of %s on %s: %w", node, p.Host, err)
	}
	return st, nil
}

// EnrollIPMINode creates an ipmi node (ipmitool power, the ipmitool-socat
// console, driver_info di) in the store, for conductors started with
// -ipmi-console, and returns its UUID.
func EnrollIPMINode(ctx context.Context, store baremetal.Store, labURL, name string, di map[string]any) (string, error) {
	client, err := agentclient.NewClient(agentclient.ClientConfig{})
	if err != nil {
		return "", err
	}
	defer client.Close()
	m := console.NewManager(console.Options{})
	defer m.Close()
	reg, err := NewIPMIRegistry(labURL, "enroll", client, m, nil)
	if err != nil {
		return "", err
	}
	nd := &baremetal.Node{Name: name, Driver: ipmitool.HardwareType, DriverInfo: di}
	ifs, err := reg.FillDefaults(driver.NodeInterfaces{Node: name, HardwareType: nd.Driver,
		Interfaces: map[driver.Kind]string{driver.KindConsole: ipmisol.Name}})
	if err != nil {
		return "", err
	}
	nd.SetInterfaces(ifs)
	if err := store.CreateNodes(ctx, []*baremetal.Node{nd}); err != nil {
		return "", err
	}
	return nd.UUID, nil
}

// EnrollFleet creates n lab nodes (lab power, direct deploy, an image) in
// the store, named prefix-0000 on, and returns their UUIDs.
func EnrollFleet(ctx context.Context, store baremetal.Store, labURL, prefix string, n int) ([]string, error) {
	client, err := agentclient.NewClient(agentclient.ClientConfig{})
	if err != nil {
		return nil, err
	}
	defer client.Close()
	reg, err := NewRegistry(labURL, "enroll", client)
	if err != nil {
		return nil, err
	}
	nodes := make([]*baremetal.Node, n)
	for i := range nodes {
		nd := &baremetal.Node{Name: fmt.Sprintf("%s-%04d", prefix, i), Driver: LabHardwareType,
			PowerInterface: LabPowerName, DeployInterface: agentdeploy.Name,
			InstanceInfo: map[string]any{"image_source": "http://images.example/ubuntu.qcow2", "image_checksum": "0123456789abcdef0123456789abcdef"}}
		ifs, err := reg.FillDefaults(driver.NodeInterfaces{Node: nd.Name, HardwareType: nd.Driver,
			Interfaces: map[driver.Kind]string{driver.KindPower: LabPowerName, driver.KindDeploy: agentdeploy.Name}})
		if err != nil {
			return nil, err
		}
		nd.SetInterfaces(ifs)
		nodes[i] = nd
	}
	if err := store.CreateNodes(ctx, nodes); err != nil {
		return nil, err
	}
	out := make([]string, n)
	for i, nd := range nodes {
		out[i] = nd.UUID
	}
	return out, nil
}

// Snapshot keeps the latest copy of every node, refreshed by one poller,
// so that hundreds of waiters do not each query the database.
type Snapshot struct {
	mu    sync.Mutex
	nodes map[string]*baremetal.Node
	at    time.Time
}

// Poll refreshes the snapshot every interval until ctx ends.
func (s *Snapshot) Poll(ctx context.Context, store baremetal.Store, interval time.Duration) {
	for {
		all, err := store.ListNodes(ctx, baremetal.NodeFilter{}, baremetal.Page{})
		if err == nil {
			m := make(map[string]*baremetal.Node, len(all))
			for _, n := range all {
				m[n.UUID] = n
			}
			s.mu.Lock()
			s.nodes, s.at = m, time.Now()
			s.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}

// Get returns the node's latest copy (nil before the first poll).
func (s *Snapshot) Get(uuid string) *baremetal.Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nodes[uuid]
}

// All returns the latest copies.
func (s *Snapshot) All() []*baremetal.Node {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*baremetal.Node, 0, len(s.nodes))
	for _, n := range s.nodes {
		out = append(out, n)
	}
	return out
}

// VerbClient sends verbs to the lab conductors' control API, trying the
// live ones in turn: any conductor accepts a verb for any node.
type VerbClient struct {
	hc    *http.Client
	mu    sync.Mutex
	procs []*Process
	next  int
}

// NewVerbClient returns a client over procs (updated with SetProcesses).
func NewVerbClient(procs []*Process) *VerbClient {
	return &VerbClient{hc: &http.Client{Timeout: 20 * time.Second, Transport: fleetTransport()}, procs: procs}
}

// SetProcesses replaces the processes verbs are sent to.
func (v *VerbClient) SetProcesses(procs []*Process) {
	v.mu.Lock()
	v.procs = procs
	v.mu.Unlock()
}

func (v *VerbClient) pick() *Process {
	v.mu.Lock()
	defer v.mu.Unlock()
	for range v.procs {
		p := v.procs[v.next%len(v.procs)]
		v.next++
		if p != nil && p.Alive() {
			return p
		}
	}
	return nil
}

// Call sends verb for node until a conductor accepts it, retrying a
// locked node, an unreachable or stopping conductor, for at most budget.
// It returns how many attempts were refused before the acceptance, and
// otherwise a *VerbError that matches the sentinel of the last refusal.
func (v *VerbClient) Call(ctx context.Context, node, verb string, budget time.Duration) (int, error) {
	deadline := time.Now().Add(budget)
	refused := 0
	last := &VerbError{Node: node, Verb: verb, Message: "no live conductor"}
	for time.Now().Before(deadline) {
		if p := v.pick(); p != nil {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.AgentAPI+"/lab/verb/"+node+"/"+verb, nil)
			if err != nil {
				return refused, err
			}
			resp, err := v.hc.Do(req)
			if err == nil {
				// The answer is an error text: 64 KiB is plenty.
				body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
				resp.Body.Close()
				if resp.StatusCode == http.StatusAccepted {
					return refused, nil
				}
				last = &VerbError{Node: node, Verb: verb, Status: resp.StatusCode, Reason: resp.Header.Get(refusalHeader),
					Message: fmt.Sprintf("%s: %s", resp.Status, strings.TrimSpace(string(body)))}
				if resp.StatusCode == http.StatusNotFound {
					return refused, last
				}
			} else {
				last = &VerbError{Node: node, Verb: verb, Message: err.Error()}
			}
			refused++
		}
		select {
		case <-ctx.Done():
			return refused, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	last.Budget = budget.String()
	return refused, last
}

// PID returns the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }
