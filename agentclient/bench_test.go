package agentclient_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/agentclient/agenttest"
)

// BenchmarkHeartbeats measures heartbeats accepted per second by the
// handler over loopback HTTP, sent by 1,000 simulated ramdisks (each with
// its own node, token, callback URL and pinned auto-TLS certificate, all
// hosted by one agenttest.Server), and the p50/p99 latency of each
// heartbeat as the agent sees it. The load is closed-loop with a fixed
// number of heartbeats in flight (the agents take turns); the senders run
// in the same process and share its CPUs with the handler; cpu-µs/heartbeat
// is the process CPU time (senders and handler) per heartbeat, which does
// not depend on what else the machine runs.
func BenchmarkHeartbeats(b *testing.B) {
	const agents = 1000
	backend := agenttest.NewBackend()
	defer backend.Close()
	h, err := agentclient.NewHandler(backend, agentclient.HandlerConfig{})
	if err != nil {
		b.Fatal(err)
	}
	api := httptest.NewServer(h)
	defer api.Close()
	hosts, err := agenttest.NewServer(agenttest.ServerConfig{})
	if err != nil {
		b.Fatal(err)
	}
	defer hosts.Close()
	transport := &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute}
	defer transport.CloseIdleConnections()
	hc := &http.Client{Transport: transport, Timeout: 30 * time.Second}
	ctx := context.Background()
	ramdisks := make([]*agenttest.Ramdisk, agents)
	for i := range ramdisks {
		id := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
		mac := fmt.Sprintf("52:54:00:%02x:%02x:%02x", i>>16&0xff, i>>8&0xff, i&0xff)
		if err := backend.AddNode(agentclient.Node{UUID: id, ProvisionState: "clean wait"}, mac); err != nil {
			b.Fatal(err)
		}
		rd, err := agenttest.NewRamdisk(agenttest.RamdiskConfig{APIURL: api.URL, HTTPClient: hc, MACs: []string{mac}, Server: hosts, Seed: uint64(i + 1)})
		if err != nil {
			b.Fatal(err)
		}
		defer rd.Close()
		if err := rd.Lookup(ctx); err != nil {
			b.Fatal(err)
		}
		if _, err := rd.Heartbeat(ctx); err != nil { // pins the certificate
			b.Fatal(err)
		}
		ramdisks[i] = rd
	}
	for _, inflight := range []int{4, 16} {
		b.Run(fmt.Sprintf("agents=%d/inflight=%d", agents, inflight), func(b *testing.B) {
			var next atomic.Int64
			var mu sync.Mutex
			var lat []time.Duration
			work := make(chan struct{})
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			cpu0 := processCPU()
			for w := 0; w < inflight; w++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					local := make([]time.Duration, 0, 1024)
					for range work {
						rd := ramdisks[next.Add(1)%agents]
						t0 := time.Now()
						if _, err := rd.Heartbeat(ctx); err != nil {
							b.Error(err)
						}
						local = append(local, time.Since(t0))
					}
					mu.Lock()
					lat = append(lat, local...)
					mu.Unlock()
				}()
			}
			for i := 0; i < b.N; i++ {
				work <- struct{}{}
			}
			close(work)
			wg.Wait()
			elapsed := time.Since(start)
			cpu := processCPU() - cpu0
			b.StopTimer()
			slices.Sort(lat)
			pct := func(p float64) float64 { return float64(lat[int(float64(len(lat)-1)*p)].Microseconds()) / 1000 }
			b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "heartbeats/s")
			b.ReportMetric(pct(0.50), "p50-ms")
			b.ReportMetric(pct(0.99), "p99-ms")
			if cpu > 0 {
				// CPU of senders and handler together per heartbeat: what
				// bounds the rate when the machine is shared.
				b.ReportMetric(float64(cpu.Microseconds())/float64(len(lat)), "cpu-µs/heartbeat")
			}
		})
	}
}

// BenchmarkHeartbeatHandler measures the handler alone, in process, without
// the network: the CPU cost of accepting one heartbeat (all checks, the
// constant-time token compare and recording it in the backend).
func BenchmarkHeartbeatHandler(b *testing.B) {
	backend := agenttest.NewBackend()
	h, _ := agentclient.NewHandler(backend, agentclient.HandlerConfig{})
	_, pemText, _ := agenttest.SelfSignedCert(time.Now())
	body := `{"callback_url":"https://10.0.0.5:9999","agent_token":"` + fuzzToken + `","agent_version":"10.0.0","agent_verify_ca":` + fmt.Sprintf("%q", pemText) + `}`
	_ = backend.AddNode(agentclient.Node{UUID: nodeID, ProvisionState: "clean wait", AgentToken: fuzzToken}, nodeMAC)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req := httptest.NewRequest(http.MethodPost, "/v1/heartbeat/"+nodeID, strings.NewReader(body))
		req.Header.Set(agentclient.HeaderAPIVersion, "1.68")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusAccepted {
			b.Fatalf("HTTP %d: %s", rec.Code, rec.Body)
		}
	}
}
