// Command imagebench measures what the conductor's image cache
// (image_download_source local) saves the origin: N simulated agents
// fetch one image (1 GiB by default) and verify its SHA-256 as IPA does,
// first each from the origin directly (image_download_source http), then
// through the conductor's cache (one download from the origin, served to
// each agent from the conductor's own endpoint), in one run. The
// conductor (imagecache with its HTTP endpoint) runs in a child process
// so that its CPU time is its own; the origin and the agents run in this
// one. It prints, for both, the bytes the origin sent, the wall time and
// the conductor's CPU time.
//
//	go run ./examples/imagebench -agents 10 -size 1GiB
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anvilmetal/anvil/imagecache"
	"github.com/anvilmetal/anvil/internal/procstat"
)

// conductorEnv, set to a cache directory, makes the process the
// conductor child.
const conductorEnv = "IMAGEBENCH_CONDUCTOR_DIR"

func main() {
	if dir := os.Getenv(conductorEnv); dir != "" {
		if err := conductor(dir); err != nil {
			log.Fatal(err)
		}
		return
	}
	agents := flag.Int("agents", 10, "simulated agents")
	size := flag.String("size", "1GiB", "image size (bytes, or with a KiB, MiB or GiB suffix)")
	dir := flag.String("dir", "", "working directory (default a temporary one, removed at the end)")
	flag.Parse()
	if _, err := bench(os.Stdout, *agents, *size, *dir); err != nil {
		log.Fatal(err)
	}
}

func parseSize(s string) (int64, error) {
	mult := int64(1)
	for suf, m := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if strings.HasSuffix(s, suf) {
			s, mult = strings.TrimSuffix(s, suf), m
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("size %q: want a positive number of bytes, KiB, MiB or GiB", s)
	}
	return n * mult, nil
}

// grantRequest is the child's control request: one node's image.
type grantRequest struct {
	Node string             `json:"node"`
	Req  imagecache.Request `json:"request"`
}

// conductor serves the image cache at /images/ and its control
// endpoint at /node-image on 127.0.0.1, printing its URL on stdout; it
// exits when stdin closes (its parent is gone).
func conductor(dir string) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	base := "http://" + ln.Addr().String()
	c, err := imagecache.New(imagecache.Options{Dir: dir, URLBase: base + "/images/", MaxBytes: 64 << 30, MaxImageBytes: 64 << 30})
	if err != nil {
		return err
	}
	defer c.Close()
	mux := http.NewServeMux()
	mux.Handle("/images/", c.Handler())
	mux.HandleFunc("POST /node-image", func(w http.ResponseWriter, r *http.Request) {
		var g grantRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&g); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ni, err := c.NodeImage(r.Context(), g.Node, g.Req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		_ = json.NewEncoder(w).Encode(ni)
	})
	mux.HandleFunc("GET /stats", func(w http.ResponseWriter, r *http.Request) { _ = json.NewEncoder(w).Encode(c.Stats()) })
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }() // ends at Close below
	fmt.Println("URL", base)
	_, _ = io.Copy(io.Discard, os.Stdin)
	return srv.Close()
}

// countingOrigin serves one image and counts the bytes it sends.
type countingOrigin struct {
	path string
	sent atomic.Int64
}

func (o *countingOrigin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f, err := os.Open(o.path)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer f.Close()
	st, _ := f.Stat()
	http.ServeContent(&counter{ResponseWriter: w, n: &o.sent}, r, "", st.ModTime(), f)
}

type counter struct {
	http.ResponseWriter
	n *atomic.Int64
}

// Write counts the bytes before it sends them, and takes back those not
// sent: an agent that has read the whole image has been counted, even
// when this goroutine has not run since (counting after the write, a
// loaded machine let a run's figure miss its last 32 KiB, which went to
// the next run's).
func (c *counter) Write(p []byte) (int, error) {
	c.n.Add(int64(len(p)))
	n, err := c.ResponseWriter.Write(p)
	if n < len(p) {
		c.n.Add(-int64(len(p) - n))
	}
	return n, err
}

// makeImage writes size bytes of pseudo-random content and returns its
// SHA-256.
func makeImage(path string, size int64) (string, error) {
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	w := bufio.NewWriterSize(io.MultiWriter(f, h), 1<<20)
	r := rand.New(rand.NewPCG(30, 1))
	block := make([]byte, 1<<20)
	for left := size; left > 0; left -= int64(len(block)) {
		for i := 0; i+8 <= len(block); i += 8 {
			v := r.Uint64()
			for k := range 8 {
				block[i+k] = byte(v >> (8 * k))
			}
		}
		n := min(left, int64(len(block)))
		if _, err := w.Write(block[:n]); err != nil {
			return "", err
		}
	}
	if err := w.Flush(); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// fetch downloads url and checks its SHA-256, as IPA does.
func fetch(ctx context.Context, url, sum string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	h := sha256.New()
	if _, err := io.Copy(h, resp.Body); err != nil {
		return err
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sum {
		return fmt.Errorf("checksum %s, want %s", got, sum)
	}
	return nil
}

// result is one way of fetching.
type result struct {
	name        string
	originBytes int64
	wall        time.Duration
	condCPU     time.Duration
}

// bench runs both ways and prints the table on out.
func bench(out io.Writer, agents int, sizeFlag, dir string) ([]result, error) {
	size, err := parseSize(sizeFlag)
	if err != nil {
		return nil, err
	}
	if dir == "" {
		if dir, err = os.MkdirTemp("", "imagebench-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
	}
	img := filepath.Join(dir, "disk.raw")
	fmt.Fprintf(out, "making a %d MiB image... ", size>>20)
	sum, err := makeImage(img, size)
	if err != nil {
		return nil, err
	}
	fmt.Fprintln(out, "sha256", sum[:16]+"…")
	origin := &countingOrigin{path: img}
	oln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	osrv := &http.Server{Handler: origin, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = osrv.Serve(oln) }() // ends at Close below
	defer osrv.Close()
	imageURL := "http://" + oln.Addr().String() + "/disk.raw"

	// The conductor, in its own process.
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), conductorEnv+"="+filepath.Join(dir, "cache"))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	defer func() {
		stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		return nil, fmt.Errorf("conductor: %w", err)
	}
	condURL, ok := strings.CutPrefix(strings.TrimSpace(line), "URL ")
	if !ok {
		return nil, fmt.Errorf("conductor said %q", line)
	}
	cpu := func() time.Duration {
		st, err := procstat.Read(cmd.Process.Pid)
		if err != nil {
			return 0
		}
		return st.CPU
	}
	ctx := context.Background()
	run := func(name string, agent func(i int) error) (result, error) {
		o0, c0, t0 := origin.sent.Load(), cpu(), time.Now()
		var wg sync.WaitGroup
		errs := make([]error, agents)
		for i := range agents {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = agent(i)
			}()
		}
		wg.Wait()
		r := result{name: name, originBytes: origin.sent.Load() - o0, wall: time.Since(t0), condCPU: cpu() - c0}
		return r, errors.Join(errs...)
	}
	direct, err := run("origin directly (image_download_source http)", func(int) error { return fetch(ctx, imageURL, sum) })
	if err != nil {
		return nil, err
	}
	cached, err := run("through the conductor's cache (local)", func(i int) error {
		body, _ := json.Marshal(grantRequest{Node: fmt.Sprintf("node-%d", i), Req: imagecache.Request{Source: imageURL, Checksum: sum}})
		resp, err := http.Post(condURL+"/node-image", "application/json", bytes.NewReader(body))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			return fmt.Errorf("node-image: %s: %s", resp.Status, b)
		}
		var ni imagecache.NodeImage
		if err := json.NewDecoder(resp.Body).Decode(&ni); err != nil {
			return err
		}
		if ni.HashValue != sum {
			return fmt.Errorf("the cache serves sha256 %s, want %s", ni.HashValue, sum)
		}
		return fetch(ctx, ni.URL, sum)
	})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "%d agents, one %d MiB image, each verified (SHA-256)\n", agents, size>>20)
	fmt.Fprintf(out, "%-48s %14s %10s %14s\n", "", "origin MiB", "wall s", "conductor CPU s")
	for _, r := range []result{direct, cached} {
		fmt.Fprintf(out, "%-48s %14.0f %10.1f %14.2f\n", r.name, float64(r.originBytes)/(1<<20), r.wall.Seconds(), r.condCPU.Seconds())
	}
	return []result{direct, cached}, nil
}
