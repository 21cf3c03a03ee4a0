package realipa_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/diskfs/go-diskfs/partition/gpt"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/imagecache"
	"github.com/anvilmetal/anvil/statemachine"
)

// originEnv, set to an image file, makes the test binary the benchmark's
// image origin: a process of its own, so that the conductor's CPU time
// (this process's) does not include serving the origin's bytes.
const originEnv = "ANVIL_REALIPA_ORIGIN_IMAGE"

func TestMain(m *testing.M) {
	if p := os.Getenv(originEnv); p != "" {
		if err := serveOrigin(p); err != nil {
			fmt.Fprintln(os.Stderr, "origin:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// serveOrigin serves the image at /image.raw on 127.0.0.1, counting the
// bytes it sends (GET /stats), prints its URL, and exits when stdin
// closes (its parent is gone).
func serveOrigin(path string) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	var sent atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("GET /image.raw", func(w http.ResponseWriter, r *http.Request) {
		f, err := os.Open(path)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer f.Close()
		http.ServeContent(countingWriter{w, &sent}, r, "image.raw", time.Time{}, f)
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%d", sent.Load())
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }() // ends at Close below
	fmt.Printf("URL http://%s\n", ln.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return srv.Close()
}

type countingWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c countingWriter) Write(b []byte) (int, error) {
	n, err := c.ResponseWriter.Write(b)
	c.n.Add(int64(n))
	return n, err
}

// origin is the running origin process.
type origin struct {
	url   string
	stdin io.Closer
}

func startOrigin(tb testing.TB, image string) *origin {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), originEnv+"="+image)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		stdin.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "URL ") {
		tb.Fatalf("origin printed %q: %v", line, err)
	}
	return &origin{url: strings.TrimSpace(strings.TrimPrefix(line, "URL ")), stdin: stdin}
}

// sent is how many bytes the origin has sent.
func (o *origin) sent(tb testing.TB) int64 {
	tb.Helper()
	resp, err := http.Get(o.url + "/stats")
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64))
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		tb.Fatalf("origin stats %q: %v", b, err)
	}
	return n
}

// bigImage writes a raw disk image of size bytes with a GPT and one
// partition filled with pseudo-random data (incompressible, so that
// nothing on the way is cheaper than for a real image), and returns its
// path and SHA-256.
func bigImage(tb testing.TB, dir string, size int64) (string, string) {
	tb.Helper()
	p := filepath.Join(dir, "image.raw")
	f, err := os.Create(p)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		tb.Fatal(err)
	}
	sectors := size / 512
	table := &gpt.Table{LogicalSectorSize: 512, PhysicalSectorSize: 512, ProtectiveMBR: true,
		Partitions: []*gpt.Partition{{Index: 1, Start: 2048, End: uint64(sectors - 2048), Type: gpt.LinuxFilesystem, Name: "root"}}}
	if err := table.Write(f, size); err != nil {
		tb.Fatal(err)
	}
	// The partition's content: a SHA-256 chain, 1 MiB at a time.
	block := make([]byte, 1<<20)
	seed := sha256.Sum256([]byte("anvil image distribution"))
	for off := int64(2048 * 512); off+int64(len(block)) <= (sectors-2048)*512; off += int64(len(block)) {
		for i := 0; i < len(block); i += len(seed) {
			seed = sha256.Sum256(seed[:])
			copy(block[i:], seed[:])
		}
		if _, err := f.WriteAt(block, off); err != nil {
			tb.Fatal(err)
		}
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		tb.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	return p, hex.EncodeToString(h.Sum(nil))
}

// distribution is what one round measured.
type distribution struct {
	wall        time.Duration
	originBytes int64
	cpu         time.Duration
	cacheStats  imagecache.Stats
}

func cpuTime(tb testing.TB) time.Duration {
	tb.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// distributeImage deploys one image to n nodes at once, each played by a
// real IPA process with its own file as disk, with the download source
// src ("http": each agent from the origin; "local": through the
// conductor's image cache), and measures from the deploy requests to the
// last node active.
func distributeImage(tb testing.TB, n int, src string, imagePath, imageSum string, size int64) distribution {
	tb.Helper()
	ipaSrc, python := requireIPA(tb)
	dir, err := os.MkdirTemp("", "anvil-realipa-dist-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	pyDir := filepath.Join(dir, "python")
	copyTree(tb, "testdata/python", pyDir)
	org := startOrigin(tb, imagePath)

	ctx := context.Background()
	store, err := sqlstore.OpenSQLite(ctx, filepath.Join(dir, "anvil.db"), sqlstore.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { store.Close() })
	client, err := agentclient.NewClient(agentclient.ClientConfig{CommandTimeout: 30 * time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(client.Close)
	api := httptest.NewUnstartedServer(nil)
	tb.Cleanup(api.Close)
	apiURL := "http://" + api.Listener.Addr().String()
	cache, err := imagecache.New(imagecache.Options{Dir: filepath.Join(dir, "cache"), URLBase: apiURL + "/images/",
		MaxBytes: 4 * size, MaxImageBytes: 2 * size})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cache.Close() })
	reg := driver.NewRegistry(driver.Config{
		EnabledHardwareTypes: []string{builtin.FakeHardware},
		EnabledInterfaces:    map[driver.Kind][]string{driver.KindDeploy: {agentdeploy.Name, fake.Name}},
	})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		tb.Fatal(err)
	}
	if err := reg.RegisterInterface(driver.KindDeploy, agentdeploy.Name,
		agentdeploy.NewWithOptions(client, agentdeploy.Options{Images: cache, ImageDownloadSource: src})); err != nil {
		tb.Fatal(err)
	}
	c, err := conductor.New(store, reg, conductor.Options{Hostname: "realipa-dist", DisableAutomatedClean: true,
		MaxConcurrentDeploy: n,
		Agent:               conductor.AgentSettings{Client: client, APIURL: apiURL, ForceOOBPowerOff: true},
		Logger:              slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	h, err := agentclient.NewHandler(c.AgentBackend(), agentclient.HandlerConfig{HeartbeatTimeout: 20 * time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/images/", cache.Handler())
	mux.Handle("/", h)
	api.Config.Handler = mux
	api.Start()
	if err := c.Launch(ctx); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.Stop(sctx)
	})

	nodes := make([]*baremetal.Node, n)
	devices := make([]string, n)
	for i := range nodes {
		// BIOS machines, as in deployWithRealIPA: no install_bootloader.
		nd, err := c.Enroll(ctx, &baremetal.Node{Name: fmt.Sprintf("dist-%02d", i), Driver: builtin.FakeHardware, DeployInterface: agentdeploy.Name,
			Properties: map[string]any{"capabilities": "boot_mode:bios"},
			InstanceInfo: map[string]any{
				"image_source": org.url + "/image.raw", "image_disk_format": "raw",
				"image_os_hash_algo": "sha256", "image_os_hash_value": imageSum,
			}})
		if err != nil {
			tb.Fatal(err)
		}
		mac := fmt.Sprintf("52:54:00:d1:%02x:%02x", i/256, i%256)
		if err := store.CreatePort(ctx, &baremetal.Port{NodeUUID: nd.UUID, Address: mac, PXEEnabled: true}); err != nil {
			tb.Fatal(err)
		}
		nodes[i] = nd
		// Each node's disk, sparse until the agent writes it.
		nodeDir := filepath.Join(dir, fmt.Sprintf("node%02d", i))
		if err := os.MkdirAll(nodeDir, 0o755); err != nil {
			tb.Fatal(err)
		}
		devices[i] = filepath.Join(nodeDir, "disk0")
		f, err := os.Create(devices[i])
		if err != nil {
			tb.Fatal(err)
		}
		if err := f.Truncate(size); err != nil {
			tb.Fatal(err)
		}
		f.Close()
		if err := c.Manage(ctx, nd.UUID); err != nil {
			tb.Fatal(err)
		}
	}
	var agents []*ipaProcess
	// agentLog is the log of node i's agent with its token masked.
	agentLog := func(i int) string {
		tok := ""
		if cur, err := store.GetNode(ctx, nodes[i].UUID); err == nil {
			tok, _ = cur.DriverInternalInfo[driver.InternalAgentToken].(string)
		}
		return agents[i].logText(tok)
	}
	waitAll := func(want statemachine.State, timeout time.Duration) {
		tb.Helper()
		deadline := time.Now().Add(timeout)
		for {
			for i, a := range agents {
				select {
				case <-a.done:
					tb.Fatalf("the agent of node %s exited (%v) before its node was %q; its log:\n%s", nodes[i].Name, a.cmd.ProcessState, want, agentLog(i))
				default:
				}
			}
			done := 0
			for _, nd := range nodes {
				cur, err := store.GetNode(ctx, nd.UUID)
				if err != nil {
					tb.Fatal(err)
				}
				if strings.HasSuffix(string(cur.ProvisionState), "failed") || cur.ProvisionState == statemachine.Error {
					log := ""
					if len(agents) > 0 {
						log = agentLog(slices.IndexFunc(nodes, func(n *baremetal.Node) bool { return n.UUID == cur.UUID }))
					}
					tb.Fatalf("node %s in %q (last error %q), want %q; its agent's log:\n%s", cur.Name, cur.ProvisionState, cur.LastError, want, log)
				}
				if cur.ProvisionState == want && cur.Reservation == "" {
					done++
				}
			}
			if done == len(nodes) {
				return
			}
			if time.Now().After(deadline) {
				log := ""
				if len(agents) > 0 {
					log = agentLog(0)
				}
				tb.Fatalf("%d of %d nodes reached %q within %v; the first agent's log:\n%s", done, len(nodes), want, timeout, log)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	waitAll(statemachine.Manageable, time.Minute)
	for _, nd := range nodes {
		if err := c.Provide(ctx, nd.UUID); err != nil {
			tb.Fatal(err)
		}
	}
	waitAll(statemachine.Available, time.Minute)

	// The agents start first, as ramdisks booted by the deploy's power on
	// would; they look their nodes up until the deploy puts them in a
	// state that answers (for as long as a loaded machine takes to start
	// them all).
	for i := range nodes {
		mac := fmt.Sprintf("52:54:00:d1:%02x:%02x", i/256, i%256)
		agents = append(agents, startIPA(tb, ipaSrc, python, pyDir, apiURL, devices[i], mac, freePort(tb), "--lookup_timeout", "900"))
	}
	before, cpu0 := org.sent(tb), cpuTime(tb)
	t0 := time.Now()
	for _, nd := range nodes {
		if err := c.Deploy(ctx, nd.UUID, conductor.DeployOptions{}); err != nil {
			tb.Fatal(err)
		}
	}
	waitAll(statemachine.Active, 15*time.Minute)
	d := distribution{wall: time.Since(t0), cpu: cpuTime(tb) - cpu0, originBytes: org.sent(tb) - before, cacheStats: cache.Stats()}

	// What the agents wrote is the image (IPA checked the download's
	// checksum; this checks the disk of the first and the last).
	for _, dev := range []string{devices[0], devices[n-1]} {
		f, err := os.Open(dev)
		if err != nil {
			tb.Fatal(err)
		}
		h := sha256.New()
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			tb.Fatal(err)
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != imageSum {
			tb.Fatalf("%s holds sha256 %s, want the image's %s", dev, got, imageSum)
		}
	}
	return d
}

// BenchmarkImageDistribution deploys one raw image to N nodes at once,
// each played by a real IPA 2023.1 process writing its own file: once
// with every agent downloading from the origin (image_download_source
// http), once through the conductor's image cache (local), in one run.
// It prints, for both, the wall time until every node is active, the
// bytes the origin sent and the conductor's CPU time. N and the image
// size come from ANVIL_BENCH_IPAS (default 10) and ANVIL_BENCH_IMAGE_MIB
// (default 1024).
//
//	ANVIL_TEST_IPA_SRC=… ANVIL_BENCH_IPAS=10 go test -run '^$' -bench ImageDistribution -benchtime 1x -timeout 60m ./internal/realipa/
func BenchmarkImageDistribution(b *testing.B) {
	requireIPA(b)
	n := envInt(b, "ANVIL_BENCH_IPAS", 10)
	size := int64(envInt(b, "ANVIL_BENCH_IMAGE_MIB", 1024)) << 20
	dir, err := os.MkdirTemp("", "anvil-realipa-image-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	image, sum := bigImage(b, dir, size)
	for range b.N {
		var figs [2]distribution
		for i, src := range []string{agentdeploy.ImageDownloadHTTP, agentdeploy.ImageDownloadLocal} {
			b.Run(src, func(b *testing.B) {
				figs[i] = distributeImage(b, n, src, image, sum, size)
				b.ReportMetric(figs[i].wall.Seconds(), "wall-s")
				b.ReportMetric(float64(figs[i].originBytes)/(1<<20), "origin-MiB")
				b.ReportMetric(figs[i].cpu.Seconds(), "conductor-cpu-s")
			})
		}
		direct, cached := figs[0], figs[1]
		b.Logf("%d real agents, %d MiB image: origin directly %.1f s, origin sent %d MiB, conductor CPU %.1f s; "+
			"through the conductor's cache %.1f s (%.2fx), origin sent %d MiB (%.3fx), conductor CPU %.1f s (cache: %d download(s), %d MiB served)",
			n, size>>20, direct.wall.Seconds(), direct.originBytes>>20, direct.cpu.Seconds(),
			cached.wall.Seconds(), cached.wall.Seconds()/direct.wall.Seconds(), cached.originBytes>>20,
			float64(cached.originBytes)/float64(max(direct.originBytes, 1)), cached.cpu.Seconds(),
			cached.cacheStats.Downloads, cached.cacheStats.ServedBytes>>20)
		if cached.originBytes > size+size/10 {
			b.Errorf("through the cache the origin sent %d bytes for a %d-byte image: want one download", cached.originBytes, size)
		}
		if direct.originBytes < int64(n)*size {
			b.Errorf("directly the origin sent %d bytes to %d agents of a %d-byte image", direct.originBytes, n, size)
		}
	}
}

func envInt(tb testing.TB, name string, def int) int {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		tb.Fatalf("%s=%q: want a positive whole number", name, v)
	}
	return n
}

// TestImageDistributionSmall runs the benchmark's two rounds at a small
// scale (three agents, a 16 MiB image), so that the benchmark's harness is
// proven by every run that has the real IPA.
func TestImageDistributionSmall(t *testing.T) {
	requireIPA(t)
	dir, err := os.MkdirTemp("", "anvil-realipa-image-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	const size = 16 << 20
	image, sum := bigImage(t, dir, size)
	direct := distributeImage(t, 3, agentdeploy.ImageDownloadHTTP, image, sum, size)
	cached := distributeImage(t, 3, agentdeploy.ImageDownloadLocal, image, sum, size)
	t.Logf("3 agents, 16 MiB: directly %v, origin sent %d bytes; cached %v, origin sent %d bytes, cache %+v",
		direct.wall, direct.originBytes, cached.wall, cached.originBytes, cached.cacheStats)
	if direct.originBytes < 3*size {
		t.Errorf("directly the origin sent %d bytes to 3 agents of a %d-byte image", direct.originBytes, size)
	}
	if cached.originBytes < size || cached.originBytes > size+size/10 || cached.cacheStats.Downloads != 1 || cached.cacheStats.ServedBytes < 3*size {
		t.Errorf("through the cache the origin sent %d bytes, the cache %+v: want one download of %d bytes served 3 times", cached.originBytes, cached.cacheStats, size)
	}
}
