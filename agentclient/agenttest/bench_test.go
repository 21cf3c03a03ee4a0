package agenttest_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/agentclient/agenttest"
)

// BenchmarkRamdiskFleet boots 1,000 simulated ramdisks on one shared
// agenttest.Server against one handler, waits until each has looked itself
// up and heartbeated, and reports what one running ramdisk costs: heap,
// goroutines, and the boot time of the whole fleet.
func BenchmarkRamdiskFleet(b *testing.B) {
	const n = 1000
	for i := 0; i < b.N; i++ {
		backend := agenttest.NewBackend()
		h, _ := agentclient.NewHandler(backend, agentclient.HandlerConfig{})
		api := httptest.NewServer(h)
		srv, err := agenttest.NewServer(agenttest.ServerConfig{})
		if err != nil {
			b.Fatal(err)
		}
		tr := &http.Transport{MaxIdleConnsPerHost: 64}
		hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		g0 := runtime.NumGoroutine()
		start := time.Now()
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		rds := make([]*agenttest.Ramdisk, n)
		for j := range rds {
			id := fmt.Sprintf("00000000-0000-4000-8000-%012d", j)
			mac := fmt.Sprintf("52:54:01:%02x:%02x:%02x", j>>16&0xff, j>>8&0xff, j&0xff)
			_ = backend.AddNode(agentclient.Node{UUID: id, ProvisionState: "clean wait"}, mac)
			rd, err := agenttest.NewRamdisk(agenttest.RamdiskConfig{APIURL: api.URL, HTTPClient: hc, MACs: []string{mac}, Server: srv, LookupInterval: 10 * time.Millisecond, Seed: uint64(j + 1)})
			if err != nil {
				b.Fatal(err)
			}
			rds[j] = rd
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = rd.Run(ctx)
			}()
		}
		for j := range rds {
			for rds[j].Stats().HeartbeatsAccepted == 0 {
				time.Sleep(time.Millisecond)
			}
		}
		boot := time.Since(start)
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		g1 := runtime.NumGoroutine()
		cancel()
		wg.Wait()
		for _, rd := range rds {
			_ = rd.Close()
		}
		tr.CloseIdleConnections()
		_ = srv.Close()
		api.Close()
		backend.Close()
		b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/1024/n, "heap-KiB/ramdisk")
		b.ReportMetric(float64(g1-g0)/n, "goroutines/ramdisk")
		b.ReportMetric(boot.Seconds()*1000, "boot-ms/1000")
	}
}
