// Command apibench runs the fleet benchmark's workload (enroll, manage,
// provide through automated cleaning, deploy, undeploy through cleaning,
// fake-hardware, 16 concurrent clients; see examples/fleetbench) twice in
// one invocation, each on a fresh SQLite file and a fresh conductor:
// through the Go API, as fleetbench does, and through Ironic's REST API
// (baremetal/ironicapi on a 127.0.0.1 listener) with HTTP clients that
// do what Ironic's clients do: POST /v1/nodes, PUT
// /v1/nodes/{id}/states/provision {"target": ...}, and GET the node until
// it reaches the state. It prints one JSON object with both runs' phases,
// the ratio of their total wall times, and, on the REST run's 1,000
// nodes, the requests/s of GET /v1/nodes/{id} and of a 1,000-node GET
// /v1/nodes/detail page, with the machine's load average before and
// after.
//
//	go run ./examples/apibench [-nodes 1000] [-clients 16] [-poll 20ms] [-get-requests 20000] [-detail-requests 200] [-cpuprofile FILE]
//
// The REST clients poll every -poll (Ironic's clients poll every 2 s by
// default, which would measure the sleep, not the API); a 409 (node
// locked) or 503 (concurrency limit) is retried after its Retry-After or
// a short back-off, and counted.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/ironicapi"
	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/internal/fleetwait"
	"github.com/anvilmetal/anvil/internal/procstat"
	"github.com/anvilmetal/anvil/statemachine"
)

type config struct {
	nodes          int
	clients        int
	workers        int
	poll           time.Duration
	getRequests    int
	detailRequests int
	apiVersion     string
}

// Phase is one phase's figures.
type Phase struct {
	Name      string  `json:"phase"`
	Nodes     int     `json:"nodes"`
	WallSec   float64 `json:"wall_s"`
	NodesPerS float64 `json:"nodes_per_s"`
	CPUSec    float64 `json:"cpu_s"`
	Failures  int     `json:"failures"`
	// Requests is how many HTTP requests the phase sent (REST only),
	// Retries how many of them were 409/503 answers retried.
	Requests int `json:"requests,omitempty"`
	Retries  int `json:"retries,omitempty"`
}

// Run is one run of the workload.
type Run struct {
	Via          string  `json:"via"`
	Phases       []Phase `json:"phases"`
	TotalWallSec float64 `json:"total_wall_s"`
	TotalCPUSec  float64 `json:"total_cpu_s"`
	Failures     int     `json:"failures"`
}

// Reads are the read throughput figures on the REST run's nodes.
type Reads struct {
	GetNodeRequests    int     `json:"get_node_requests"`
	GetNodePerS        float64 `json:"get_node_per_s"`
	DetailPageNodes    int     `json:"detail_page_nodes"`
	DetailRequests     int     `json:"detail_requests"`
	DetailPerS         float64 `json:"detail_per_s"`
	DetailPageBytes    int     `json:"detail_page_bytes"`
	DetailNodesPerSec  float64 `json:"detail_nodes_per_s"`
	ReadClients        int     `json:"clients"`
	ReadWallSecGet     float64 `json:"get_node_wall_s"`
	ReadWallSecDetails float64 `json:"detail_wall_s"`
}

// Report is what apibench prints.
type Report struct {
	Nodes      int     `json:"nodes"`
	Clients    int     `json:"clients"`
	Workers    int     `json:"workers"`
	Poll       string  `json:"poll_interval"`
	APIVersion string  `json:"api_version"`
	Database   string  `json:"database"`
	GoAPI      *Run    `json:"go_api"`
	REST       *Run    `json:"rest_api"`
	WallRatio  float64 `json:"rest_over_go_wall_ratio"`
	Reads      *Reads  `json:"reads"`
	LoadBefore string  `json:"loadavg_before"`
	LoadAfter  string  `json:"loadavg_after"`
	PeakRSSMiB float64 `json:"peak_rss_mib"`
}

func main() {
	var cfg config
	flag.IntVar(&cfg.nodes, "nodes", 1000, "number of nodes")
	flag.IntVar(&cfg.clients, "clients", 16, "concurrent clients (Go API callers, HTTP clients)")
	flag.IntVar(&cfg.workers, "workers", 64, "conductor worker pool size")
	flag.DurationVar(&cfg.poll, "poll", 20*time.Millisecond, "how often a REST client GETs its node while waiting for a state")
	flag.IntVar(&cfg.getRequests, "get-requests", 20000, "GET /v1/nodes/{id} requests for the read figure")
	flag.IntVar(&cfg.detailRequests, "detail-requests", 200, "GET /v1/nodes/detail?limit=1000 requests for the read figure")
	flag.StringVar(&cfg.apiVersion, "api-version", "1.78", "microversion the REST clients send (1.78: python-ironicclient's)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.Parse()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "apibench:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	rep, err := run(context.Background(), cfg)
	if rep != nil {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	}
	if err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "apibench:", err)
		os.Exit(1)
	}
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func run(ctx context.Context, cfg config) (*Report, error) {
	if cfg.nodes < 1 || cfg.clients < 1 {
		return nil, errors.New("-nodes and -clients must be at least 1")
	}
	rep := &Report{Nodes: cfg.nodes, Clients: cfg.clients, Workers: cfg.workers, Poll: cfg.poll.String(),
		APIVersion: cfg.apiVersion, Database: "sqlite file, WAL, synchronous=NORMAL", LoadBefore: loadavg()}
	defer func() { rep.LoadAfter, rep.PeakRSSMiB = loadavg(), round(procstat.SelfPeakRSSMiB()) }()

	env, err := newEnv(ctx, cfg)
	if err != nil {
		return nil, err
	}
	rep.GoAPI = goRun(ctx, cfg, env)
	env.close()
	if rep.GoAPI.Failures > 0 {
		return rep, fmt.Errorf("%d nodes failed through the Go API", rep.GoAPI.Failures)
	}

	env, err = newEnv(ctx, cfg)
	if err != nil {
		return rep, err
	}
	defer env.close()
	srv, err := env.serveAPI()
	if err != nil {
		return rep, err
	}
	rc := newRESTClient(srv, cfg)
	rep.REST, err = restRun(ctx, cfg, env, rc)
	if err != nil {
		return rep, err
	}
	if rep.REST.Failures > 0 {
		return rep, fmt.Errorf("%d nodes failed through the REST API", rep.REST.Failures)
	}
	if rep.GoAPI.TotalWallSec > 0 {
		rep.WallRatio = round(rep.REST.TotalWallSec / rep.GoAPI.TotalWallSec)
	}
	rep.Reads, err = reads(ctx, cfg, rc)
	return rep, err
}

// env is one fresh conductor on a fresh SQLite file, as fleetbench sets
// it up for fake-hardware.
type env struct {
	dir   string
	store *sqlstore.Store
	reg   *driver.Registry
	c     *conductor.Conductor
	w     *fleetwait.Waiter
	ln    net.Listener
	srv   *http.Server
}

func newEnv(ctx context.Context, cfg config) (*env, error) {
	dir, err := os.MkdirTemp("", "anvil-apibench-")
	if err != nil {
		return nil, err
	}
	e := &env{dir: dir}
	if e.store, err = sqlstore.OpenSQLite(ctx, filepath.Join(dir, "anvil.db"), sqlstore.Options{}); err != nil {
		e.close()
		return nil, err
	}
	e.reg = driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}})
	if err := e.reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		e.close()
		return nil, err
	}
	e.c, err = conductor.New(e.store, e.reg, conductor.Options{
		Hostname: "apibench", Workers: cfg.workers, Logger: slog.New(slog.DiscardHandler),
		WatchBuffer: max(conductor.DefaultWatchBuffer, 16*cfg.nodes),
	})
	if err != nil {
		e.close()
		return nil, err
	}
	if err := e.c.Launch(ctx); err != nil {
		e.close()
		return nil, err
	}
	e.w = fleetwait.New(e.c)
	return e, nil
}

// serveAPI serves Ironic's API for the conductor on 127.0.0.1 and returns
// its base URL.
func (e *env) serveAPI() (string, error) {
	h, err := ironicapi.New(ironicapi.Options{Conductor: e.c, Drivers: e.reg})
	if err != nil {
		return "", err
	}
	if e.ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return "", err
	}
	e.srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	go func() { _ = e.srv.Serve(e.ln) }() // ends when close shuts the server down
	return "http://" + e.ln.Addr().String(), nil
}

func (e *env) close() {
	if e.srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = e.srv.Shutdown(ctx)
		cancel()
	}
	if e.w != nil {
		e.w.Close()
	}
	if e.c != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = e.c.Stop(ctx)
		cancel()
	}
	if e.store != nil {
		_ = e.store.Close()
	}
	_ = os.RemoveAll(e.dir)
}

var instanceInfo = map[string]any{"image_source": "http://images.example.com/img.qcow2", "image_checksum": "0123456789abcdef0123456789abcdef"}

func nodeName(run string, i int) string { return fmt.Sprintf("apibench-%s-%06d", run, i) }

type phaseSpec struct {
	name   string // the fleet benchmark's phase name
	target string // the provision target sent over REST
	want   statemachine.State
}

var phases = []phaseSpec{
	{"manage", "manage", statemachine.Manageable},
	{"provide", "provide", statemachine.Available},
	{"deploy", "active", statemachine.Active},
	{"undeploy", "deleted", statemachine.Available},
}

// goRun is fleetbench's workload through the Go API.
func goRun(ctx context.Context, cfg config, e *env) *Run {
	r := &Run{Via: "go api"}
	uuids := make([]string, cfg.nodes)
	totalStart, totalCPU := time.Now(), procstat.SelfCPU().Seconds()
	var failures atomic.Int64
	start, cpu := time.Now(), procstat.SelfCPU().Seconds()
	parallel(cfg.nodes, cfg.clients, func(i int) {
		n, err := e.c.Enroll(ctx, &baremetal.Node{Name: nodeName("go", i), Driver: builtin.FakeHardware,
			PowerInterface: fake.Name, DeployInterface: fake.Name, InstanceInfo: cloneMap(instanceInfo)})
		if err != nil {
			failures.Add(1)
			return
		}
		uuids[i] = n.UUID
	})
	r.Phases = append(r.Phases, figures("enroll", cfg.nodes, time.Since(start), procstat.SelfCPU().Seconds()-cpu, int(failures.Load()), 0, 0))
	verbs := map[string]func(context.Context, string) error{
		"manage": e.c.Manage, "provide": e.c.Provide, "undeploy": e.c.Undeploy,
		"deploy": func(ctx context.Context, u string) error { return e.c.Deploy(ctx, u, conductor.DeployOptions{}) },
	}
	for _, ph := range phases {
		failures.Store(0)
		start, cpu := time.Now(), procstat.SelfCPU().Seconds()
		parallel(cfg.nodes, cfg.clients, func(i int) {
			u := uuids[i]
			if u == "" {
				return
			}
			ch := e.w.Expect(u)
			err := verbs[ph.name](ctx, u)
			got := ""
			if err == nil {
				got = <-ch
			}
			e.w.Forget(u)
			if got != string(ph.want) {
				failures.Add(1)
				uuids[i] = ""
			}
		})
		r.Phases = append(r.Phases, figures(ph.name, cfg.nodes, time.Since(start), procstat.SelfCPU().Seconds()-cpu, int(failures.Load()), 0, 0))
	}
	r.finish(totalStart, totalCPU)
	return r
}

func (r *Run) finish(start time.Time, cpu float64) {
	r.TotalWallSec = round(time.Since(start).Seconds())
	r.TotalCPUSec = round(procstat.SelfCPU().Seconds() - cpu)
	for _, p := range r.Phases {
		r.Failures += p.Failures
	}
}

// restClient sends the benchmark's requests.
type restClient struct {
	base     string
	version  string
	hc       *http.Client
	requests atomic.Int64
	retries  atomic.Int64
}

func newRESTClient(base string, cfg config) *restClient {
	tr := &http.Transport{MaxIdleConns: 4 * cfg.clients, MaxIdleConnsPerHost: 4 * cfg.clients, IdleConnTimeout: time.Minute}
	return &restClient{base: base, version: cfg.apiVersion, hc: &http.Client{Transport: tr, Timeout: 60 * time.Second}}
}

// ErrNotServed is an endpoint the handler does not route (its catch-all
// 404 "The resource could not be found.").
var ErrNotServed = errors.New("endpoint not served by this build of ironicapi")

// APIError is an unexpected status.
type APIError struct {
	Method, Path string
	Status       int
	Body         string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s %s: %d %s", e.Method, e.Path, e.Status, e.Body)
}

// do sends one request (retrying 409 and 503 answers) and decodes a JSON
// answer into out when out is not nil.
func (c *restClient) do(ctx context.Context, method, path string, body any, want int, out any) error {
	var data []byte
	if body != nil {
		var err error
		if data, err = json.Marshal(body); err != nil {
			return err
		}
	}
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(data))
		if err != nil {
			return err
		}
		req.Header.Set("X-OpenStack-Ironic-API-Version", c.version)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		c.requests.Add(1)
		resp, err := c.hc.Do(req)
		if err != nil {
			return err
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
		resp.Body.Close()
		if err != nil {
			return err
		}
		switch {
		case resp.StatusCode == want:
			if out != nil {
				return json.Unmarshal(b, out)
			}
			return nil
		case (resp.StatusCode == http.StatusConflict || resp.StatusCode == http.StatusServiceUnavailable) && attempt < 200:
			c.retries.Add(1)
			wait := 50 * time.Millisecond
			if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 && resp.StatusCode == http.StatusServiceUnavailable {
				wait = time.Duration(s) * time.Second
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(wait):
			}
			continue
		case resp.StatusCode == http.StatusNotFound && bytes.Contains(b, []byte(`The resource could not be found.`)):
			return fmt.Errorf("%s %s: %w", method, path, ErrNotServed)
		}
		return &APIError{Method: method, Path: path, Status: resp.StatusCode, Body: string(b)}
	}
}

type nodeState struct {
	UUID                 string  `json:"uuid"`
	ProvisionState       string  `json:"provision_state"`
	TargetProvisionState *string `json:"target_provision_state"`
	LastError            *string `json:"last_error"`
}

// waitState GETs the node every poll until it rests in want (no target)
// or fails, as Ironic's clients wait.
func (c *restClient) waitState(ctx context.Context, uuid string, want statemachine.State, poll time.Duration) error {
	path := "/v1/nodes/" + uuid + "?fields=uuid,provision_state,target_provision_state,last_error"
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var n nodeState
		if err := c.do(ctx, http.MethodGet, path, nil, http.StatusOK, &n); err != nil {
			return err
		}
		if n.ProvisionState == string(want) && n.TargetProvisionState == nil {
			return nil
		}
		if statemachine.IsFailure(statemachine.State(n.ProvisionState)) {
			le := ""
			if n.LastError != nil {
				le = *n.LastError
			}
			return fmt.Errorf("node %s ended in %s: %s", uuid, n.ProvisionState, le)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s still %s after 5 minutes, waiting for %s", uuid, n.ProvisionState, want)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}

// restRun is the same workload through Ironic's REST API.
func restRun(ctx context.Context, cfg config, e *env, c *restClient) (*Run, error) {
	r := &Run{Via: "rest api (" + c.base + ")"}
	uuids := make([]string, cfg.nodes)
	var (
		failures atomic.Int64
		firstMu  sync.Mutex
		first    error
	)
	fail := func(err error) {
		failures.Add(1)
		firstMu.Lock()
		if first == nil {
			first = err
		}
		firstMu.Unlock()
	}
	mark := func() (time.Time, float64, int64, int64) {
		return time.Now(), procstat.SelfCPU().Seconds(), c.requests.Load(), c.retries.Load()
	}
	phaseEnd := func(name string, start time.Time, cpu float64, req, ret int64) {
		r.Phases = append(r.Phases, figures(name, cfg.nodes, time.Since(start), procstat.SelfCPU().Seconds()-cpu, int(failures.Load()),
			int(c.requests.Load()-req), int(c.retries.Load()-ret)))
	}
	totalStart, totalCPU := time.Now(), procstat.SelfCPU().Seconds()
	start, cpu, req, ret := mark()
	parallel(cfg.nodes, cfg.clients, func(i int) {
		var n nodeState
		err := c.do(ctx, http.MethodPost, "/v1/nodes", map[string]any{
			"name": nodeName("rest", i), "driver": builtin.FakeHardware,
			"power_interface": fake.Name, "deploy_interface": fake.Name, "instance_info": instanceInfo,
		}, http.StatusCreated, &n)
		if err != nil {
			fail(err)
			return
		}
		uuids[i] = n.UUID
	})
	phaseEnd("enroll", start, cpu, req, ret)
	if errors.Is(first, ErrNotServed) {
		return r, first
	}
	for _, ph := range phases {
		failures.Store(0)
		start, cpu, req, ret := mark()
		parallel(cfg.nodes, cfg.clients, func(i int) {
			u := uuids[i]
			if u == "" {
				return
			}
			err := c.do(ctx, http.MethodPut, "/v1/nodes/"+u+"/states/provision", map[string]any{"target": ph.target}, http.StatusAccepted, nil)
			if err == nil {
				err = c.waitState(ctx, u, ph.want, cfg.poll)
			}
			if err != nil {
				fail(fmt.Errorf("%s: %w", ph.name, err))
				uuids[i] = ""
			}
		})
		phaseEnd(ph.name, start, cpu, req, ret)
		if errors.Is(first, ErrNotServed) {
			return r, first
		}
	}
	r.finish(totalStart, totalCPU)
	if first != nil {
		fmt.Fprintln(os.Stderr, "apibench: first REST failure:", first)
	}
	return r, nil
}

// reads measures GET /v1/nodes/{id} and the 1,000-node detail page.
func reads(ctx context.Context, cfg config, c *restClient) (*Reads, error) {
	var page struct {
		Nodes []nodeState `json:"nodes"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/nodes/detail?limit=1000", nil, http.StatusOK, &page); err != nil {
		return nil, err
	}
	if len(page.Nodes) == 0 {
		return nil, errors.New("GET /v1/nodes/detail returned no node")
	}
	out := &Reads{ReadClients: cfg.clients, DetailPageNodes: len(page.Nodes)}
	ids := make([]string, len(page.Nodes))
	for i, n := range page.Nodes {
		ids[i] = n.UUID
	}
	var firstErr firstError
	start := time.Now()
	parallel(cfg.getRequests, cfg.clients, func(i int) {
		if err := c.do(ctx, http.MethodGet, "/v1/nodes/"+ids[i%len(ids)], nil, http.StatusOK, nil); err != nil {
			firstErr.set(err)
		}
	})
	wall := time.Since(start)
	out.GetNodeRequests, out.ReadWallSecGet = cfg.getRequests, round(wall.Seconds())
	out.GetNodePerS = round(float64(cfg.getRequests) / wall.Seconds())

	var bytesSeen atomic.Int64
	start = time.Now()
	parallel(cfg.detailRequests, cfg.clients, func(int) {
		var p struct {
			Nodes []json.RawMessage `json:"nodes"`
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/v1/nodes/detail?limit=1000", nil)
		if err != nil {
			firstErr.set(err)
			return
		}
		req.Header.Set("X-OpenStack-Ironic-API-Version", c.version)
		resp, err := c.hc.Do(req)
		if err != nil {
			firstErr.set(err)
			return
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil && resp.StatusCode == http.StatusOK {
			err = json.Unmarshal(b, &p)
		}
		if err == nil && len(p.Nodes) != len(ids) {
			err = fmt.Errorf("detail page of %d nodes, want %d", len(p.Nodes), len(ids))
		}
		if err != nil {
			firstErr.set(fmt.Errorf("GET /v1/nodes/detail: %d: %v", resp.StatusCode, err))
			return
		}
		bytesSeen.Store(int64(len(b)))
	})
	wall = time.Since(start)
	out.DetailRequests, out.ReadWallSecDetails = cfg.detailRequests, round(wall.Seconds())
	out.DetailPerS = round(float64(cfg.detailRequests) / wall.Seconds())
	out.DetailNodesPerSec = round(out.DetailPerS * float64(len(ids)))
	out.DetailPageBytes = int(bytesSeen.Load())
	return out, firstErr.get()
}

// firstError keeps the first error of many goroutines.
type firstError struct {
	mu  sync.Mutex
	err error
}

func (f *firstError) set(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = err
	}
}

func (f *firstError) get() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

func figures(name string, nodes int, wall time.Duration, cpu float64, failures, requests, retries int) Phase {
	return Phase{Name: name, Nodes: nodes, WallSec: round(wall.Seconds()), CPUSec: round(cpu), Failures: failures,
		NodesPerS: round(float64(nodes-failures) / wall.Seconds()), Requests: requests, Retries: retries}
}

func round(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }

func cloneMap(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// parallel runs fn(0..n-1) on k goroutines, each taking the next index.
func parallel(n, k int, fn func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				fn(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}
