// Command bodybench measures what hostile request bodies cost anvild: it
// builds anvild, starts it on 127.0.0.1 with http_basic authentication
// and embedded SQLite, enrolls -nodes nodes, and then, once per phase on
// a fresh anvild,
//
//   - unauth: -unauth-clients concurrent POST /v1/continue_inspection
//     bodies of -unauth-mib MiB without credentials (the ramdisk
//     endpoint takes them: it is unauthenticated by design);
//   - provision: -provision-clients concurrent PUT
//     /v1/nodes/{id}/states/provision bodies of -provision-mib MiB (a
//     config drive near the 96 MiB limit), with credentials;
//
// while one client lists GET /v1/nodes in a loop. It prints one JSON
// object per phase: anvild's resident memory before the load and its
// peak growth (VmHWM less the resident set before), the answers by
// status code, and the p50/p99 latency of GET /v1/nodes during the load
// beside the same client's p50/p99 on the idle anvild just before
// (the baseline of the same run), with the machine's load average.
//
//	go run ./examples/bodybench [-nodes 100] [-unauth-clients 200] [-unauth-mib 3.9] [-provision-clients 10] [-provision-mib 95] [-rounds 3]
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Ironic's own test user file: myName / myPassword.
const (
	htpasswdLine = "myName:$2y$05$lE3eGtyj41jZwrzS87KTqe6.JETVCWBkc32C63UP2aYrGoYOEpbJm\n"
	authHeader   = "Basic bXlOYW1lOm15UGFzc3dvcmQ="
)

type phaseReport struct {
	Phase         string         `json:"phase"`
	Clients       int            `json:"clients"`
	BodyMiB       float64        `json:"body_mib"`
	Rounds        int            `json:"rounds"`
	BaseRSSMiB    float64        `json:"rss_before_mib"`
	PeakGrowthMiB float64        `json:"peak_rss_growth_mib"`
	Statuses      map[string]int `json:"statuses"`
	IdleListP50ms float64        `json:"idle_list_p50_ms"`
	IdleListP99ms float64        `json:"idle_list_p99_ms"`
	LoadListP50ms float64        `json:"load_list_p50_ms"`
	LoadListP99ms float64        `json:"load_list_p99_ms"`
	ListErrors    int            `json:"list_errors"`
	LoadSeconds   float64        `json:"load_s"`
	LoadAvgBefore string         `json:"loadavg_before"`
	LoadAvgAfter  string         `json:"loadavg_after"`
}

func main() {
	nodes := flag.Int("nodes", 100, "nodes enrolled before the load")
	unauthClients := flag.Int("unauth-clients", 200, "concurrent unauthenticated continue_inspection bodies")
	unauthMiB := flag.Float64("unauth-mib", 3.9, "size of each continue_inspection body, MiB")
	provClients := flag.Int("provision-clients", 10, "concurrent provision bodies")
	provMiB := flag.Float64("provision-mib", 95, "size of each provision body, MiB")
	rounds := flag.Int("rounds", 3, "times each client sends its body")
	bin := flag.String("anvild", "", "anvild executable (default: go build ./cmd/anvild)")
	flag.Parse()

	dir, err := os.MkdirTemp("", "bodybench-")
	check(err)
	defer os.RemoveAll(dir)
	if *bin == "" {
		*bin = filepath.Join(dir, "anvild")
		build := exec.Command("go", "build", "-o", *bin, "./cmd/anvild")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		check(build.Run())
	}
	var out []phaseReport
	for _, ph := range []struct {
		name    string
		clients int
		mib     float64
	}{{"unauth", *unauthClients, *unauthMiB}, {"provision", *provClients, *provMiB}} {
		out = append(out, runPhase(*bin, dir, ph.name, ph.clients, ph.mib, *nodes, *rounds))
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	check(enc.Encode(out))
}

type daemon struct {
	cmd *exec.Cmd
	url string
}

func startAnvild(bin, dir, name string) *daemon {
	state := filepath.Join(dir, name)
	check(os.MkdirAll(state, 0o700))
	htpasswd := filepath.Join(state, "htpasswd")
	check(os.WriteFile(htpasswd, []byte(htpasswdLine), 0o600))
	conf := filepath.Join(state, "anvild.conf")
	check(os.WriteFile(conf, []byte("[DEFAULT]\nauth_strategy = http_basic\nhttp_basic_auth_user_file = "+htpasswd+"\n"), 0o600))
	cmd := exec.Command(bin, "--config-file", conf, "--host-ip", "127.0.0.1", "--port", "0", "--state-dir", state, "--host", "bodybench")
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME=", "XDG_DATA_HOME="+state)
	stdout, err := cmd.StdoutPipe()
	check(err)
	cmd.Stderr = io.Discard
	check(cmd.Start())
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "anvild: Ironic API on "); ok {
				urls <- u
			}
		}
	}()
	select {
	case u := <-urls:
		return &daemon{cmd: cmd, url: u}
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		fmt.Fprintln(os.Stderr, "bodybench: anvild did not start")
		os.Exit(1)
	}
	return nil
}

func (d *daemon) stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = d.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = d.cmd.Process.Kill()
		<-done
	}
}

// memMiB reads a VmRSS- or VmHWM-like line of /proc/pid/status.
func memMiB(pid int, key string) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			kib, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kib / 1024
		}
	}
	return 0
}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	return strings.TrimSpace(string(b))
}

func request(hc *http.Client, method, url string, body []byte, auth bool) (int, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if auth {
		// The ramdisk sends no version header; the API's clients do.
		req.Header.Set("X-OpenStack-Ironic-API-Version", "1.89")
		req.Header.Set("Authorization", authHeader)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// listLatencies lists the nodes n times (or until stop) and returns the
// latencies.
func listLatencies(hc *http.Client, url string, n int, stop <-chan struct{}) ([]time.Duration, int) {
	var out []time.Duration
	errs := 0
	for i := 0; n <= 0 || i < n; i++ {
		select {
		case <-stop:
			return out, errs
		default:
		}
		start := time.Now()
		code, err := request(hc, "GET", url+"/v1/nodes", nil, true)
		if err != nil || code != 200 {
			errs++
			continue
		}
		out = append(out, time.Since(start))
	}
	return out, errs
}

func pct(d []time.Duration, p float64) float64 {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(float64(len(s)-1) * p)
	return float64(s[i].Microseconds()) / 1000
}

func runPhase(bin, dir, name string, clients int, mib float64, nodes, rounds int) phaseReport {
	d := startAnvild(bin, dir, name)
	defer d.stop()
	hc := &http.Client{Timeout: 5 * time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: clients + 4}}
	var uuids []string
	for i := 0; i < nodes; i++ {
		req, _ := http.NewRequest("POST", d.url+"/v1/nodes", strings.NewReader(fmt.Sprintf(`{"driver":"fake-hardware","name":"bench-%d"}`, i)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-OpenStack-Ironic-API-Version", "1.89")
		req.Header.Set("Authorization", authHeader)
		resp, err := hc.Do(req)
		check(err)
		var n struct {
			UUID string `json:"uuid"`
		}
		check(json.NewDecoder(resp.Body).Decode(&n))
		resp.Body.Close()
		if resp.StatusCode != 201 {
			fmt.Fprintf(os.Stderr, "bodybench: enroll: %d\n", resp.StatusCode)
			os.Exit(1)
		}
		uuids = append(uuids, n.UUID)
	}
	idle, _ := listLatencies(hc, d.url, 200, nil)
	time.Sleep(time.Second)
	pid := d.cmd.Process.Pid
	rep := phaseReport{Phase: name, Clients: clients, BodyMiB: mib, Rounds: rounds, Statuses: map[string]int{},
		BaseRSSMiB: memMiB(pid, "VmRSS"), LoadAvgBefore: loadavg(),
		IdleListP50ms: pct(idle, 0.5), IdleListP99ms: pct(idle, 0.99)}
	baseHWM := memMiB(pid, "VmHWM")

	size := int(mib * (1 << 20))
	var body []byte
	switch name {
	case "unauth":
		// Inspection data: an inventory with one huge field.
		body = []byte(`{"inventory":{"interfaces":[{"name":"eth0","mac_address":"52:54:00:12:34:56"}],"bmc_address":"192.0.2.1","padding":"`)
		body = append(body, bytes.Repeat([]byte("x"), size-len(body)-3)...)
		body = append(body, `"}}`...)
	case "provision":
		body = []byte(`{"target":"active","configdrive":"`)
		body = append(body, bytes.Repeat([]byte("A"), size-len(body)-2)...)
		body = append(body, `"}`...)
	}
	stop := make(chan struct{})
	var listed []time.Duration
	var listErrs int
	listDone := make(chan struct{})
	go func() {
		listed, listErrs = listLatencies(hc, d.url, 0, stop)
		close(listDone)
	}()
	peak := 0.0
	sampleDone := make(chan struct{})
	go func() {
		defer close(sampleDone)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				peak = max(peak, memMiB(pid, "VmHWM"))
			}
		}
	}()
	var mu sync.Mutex
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				var code int
				var err error
				if name == "unauth" {
					code, err = request(hc, "POST", d.url+"/v1/continue_inspection", body, false)
				} else {
					code, err = request(hc, "PUT", d.url+"/v1/nodes/"+uuids[i%len(uuids)]+"/states/provision", body, true)
				}
				key := strconv.Itoa(code)
				if err != nil {
					key = "error"
				}
				mu.Lock()
				rep.Statuses[key]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	rep.LoadSeconds = time.Since(start).Seconds()
	close(stop)
	<-listDone
	<-sampleDone
	peak = max(peak, memMiB(pid, "VmHWM"), baseHWM)
	rep.PeakGrowthMiB = peak - rep.BaseRSSMiB
	rep.LoadListP50ms, rep.LoadListP99ms, rep.ListErrors = pct(listed, 0.5), pct(listed, 0.99), listErrs
	rep.LoadAvgAfter = loadavg()
	return rep
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "bodybench:", err)
		os.Exit(1)
	}
}
