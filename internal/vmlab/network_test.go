package vmlab

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestNetworkDo checks that a listener opened in Do lives in the namespace:
// it binds the bridge's address, which the host does not have, and a
// client in the namespace reaches it while the host cannot.
func TestNetworkDo(t *testing.T) {
	n := NewTestNetwork(t)
	var ln net.Listener
	if err := n.Do(func() error {
		var err error
		ln, err = net.Listen("tcp", ServerIP+":0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "in the namespace")
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	// The host has no 192.0.2.1.
	if l, err := net.Listen("tcp", ServerIP+":0"); err == nil {
		l.Close()
		t.Fatal("the host has the namespace's address: the test would not prove isolation")
	}
	var body []byte
	if err := n.Do(func() error {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, "GET / HTTP/1.0\r\n\r\n"); err != nil {
			return err
		}
		body, err = io.ReadAll(c)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if len(body) == 0 || !strings.Contains(string(body), "in the namespace") {
		t.Fatalf("response %q", body)
	}

	// A process started in the namespace sees the bridge; Close stops it
	// by PID.
	p, err := n.Start("sleep", n.Command("sleep", "600"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := n.Command("ip", "-br", "addr", "show", BridgeName).Output()
	if err != nil || !strings.Contains(string(out), ServerIP+"/24") {
		t.Fatalf("ip addr in the namespace: %q, %v", out, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(ctx); err == nil {
		t.Error("sleep exited 0: it should have been signalled")
	}
	if _, err := os.Stat(netnsDir + "/" + n.Name()); !os.IsNotExist(err) {
		t.Errorf("namespace %s still exists after Close: %v", n.Name(), err)
	}
}

// TestNetworkGo runs a Run-style server: it opens its listener on the
// goroutine Go gave it and blocks until its context ends.
func TestNetworkGo(t *testing.T) {
	n := NewTestNetwork(t)
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	done := n.Go(func() error {
		ln, err := net.Listen("tcp", ServerIP+":0")
		if err != nil {
			return err
		}
		addr <- ln.Addr().String()
		<-ctx.Done()
		return ln.Close()
	})
	var a string
	select {
	case a = <-addr:
	case err := <-done:
		t.Fatalf("server ended at start: %v", err)
	}
	if err := n.Do(func() error {
		c, err := net.DialTimeout("tcp", a, 5*time.Second)
		if err == nil {
			c.Close()
		}
		return err
	}); err != nil {
		t.Fatalf("dial %s in the namespace: %v", a, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestNewNetworkRemovesStaleNamespaces leaves a namespace named for a
// process that has exited (a test binary killed before its clean-up) and
// one named for a live process: a new Network removes the first only.
func TestNewNetworkRemovesStaleNamespaces(t *testing.T) {
	if os.Getenv(EnvQEMU) != "1" || os.Geteuid() != 0 {
		t.Skip(EnvQEMU + "=1 and root needed: namespace test skipped")
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stale := namePrefix + strconv.Itoa(dead.Process.Pid) + "-stale"
	live := namePrefix + "1-live" + strconv.Itoa(os.Getpid())
	for _, name := range []string{stale, live} {
		if err := run(ctx, "ip", "netns", "add", name); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = run(context.Background(), "ip", "netns", "delete", name) })
	}
	// A process left running in the stale namespace is killed with it.
	orphan := exec.Command("ip", "netns", "exec", stale, "sleep", "600")
	if err := orphan.Start(); err != nil {
		t.Fatal(err)
	}
	orphanDone := make(chan error, 1)
	go func() { orphanDone <- orphan.Wait() }()
	t.Cleanup(func() { _ = orphan.Process.Kill() })
	for i := 0; ; i++ {
		out, _ := exec.Command("ip", "netns", "pids", stale).Output()
		if len(strings.TrimSpace(string(out))) > 0 {
			break
		}
		if i == 100 {
			t.Fatal("the orphan never entered the stale namespace")
		}
		time.Sleep(50 * time.Millisecond)
	}
	NewTestNetwork(t)
	select {
	case <-orphanDone:
	case <-time.After(10 * time.Second):
		t.Error("the process in the stale namespace still runs")
	}
	if _, err := os.Stat(netnsDir + "/" + stale); !os.IsNotExist(err) {
		t.Errorf("stale namespace %s was kept: %v", stale, err)
	}
	if _, err := os.Stat(netnsDir + "/" + live); err != nil {
		t.Errorf("namespace %s of a live process was removed: %v", live, err)
	}
}

// TestProcessOutlivesDoThreads: a process the network started keeps
// running while Do's goroutines take their locked threads down (the
// child's Pdeathsig fires when the thread that forked it ends; before the
// forker, a Do could lock, and then end, the very thread an earlier Start
// had forked on, and the VM was killed mid-boot).
func TestProcessOutlivesDoThreads(t *testing.T) {
	n := NewTestNetwork(t)
	var procs []*Process
	for i := 0; i < 4; i++ {
		p, err := n.Start("sleep", n.Command("sleep", "60"))
		if err != nil {
			t.Fatal(err)
		}
		procs = append(procs, p)
	}
	for i := 0; i < 200; i++ {
		if err := n.Do(func() error { return nil }); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	for _, p := range procs {
		select {
		case <-p.Done():
			t.Fatalf("%s (PID %d) died while Do's threads ended: %v", p.Name(), p.PID(), p.err)
		default:
		}
	}
}

// TestNetworkFamilies checks each family's bridge addresses: an IPv6
// network's bridge holds ServerIP6 only (a server binds it at once: no
// duplicate address detection) and no IPv4 address, a dual-stack one
// both; and the options that contradict each other are refused.
func TestNetworkFamilies(t *testing.T) {
	for _, tc := range []struct {
		family     Family
		want, none []string
	}{
		{IPv4, []string{ServerIP}, []string{ServerIP6}},
		{IPv6, []string{ServerIP6}, []string{ServerIP}},
		{Dual, []string{ServerIP, ServerIP6}, nil},
	} {
		t.Run(string(tc.family), func(t *testing.T) {
			n := NewTestNetworkWith(t, NetworkOptions{Family: tc.family})
			if n.Family() != tc.family {
				t.Fatalf("Family() = %q, want %q", n.Family(), tc.family)
			}
			for _, a := range tc.want {
				err := n.Do(func() error {
					ln, err := net.Listen("tcp", net.JoinHostPort(a, "0"))
					if err == nil {
						ln.Close()
					}
					return err
				})
				if err != nil {
					t.Errorf("binding %s in the %s network: %v", a, tc.family, err)
				}
			}
			for _, a := range tc.none {
				err := n.Do(func() error {
					ln, err := net.Listen("tcp", net.JoinHostPort(a, "0"))
					if err == nil {
						ln.Close()
					}
					return err
				})
				if err == nil {
					t.Errorf("the %s network's bridge holds %s", tc.family, a)
				}
			}
		})
	}
	if os.Getenv(EnvQEMU) != "1" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, o := range []NetworkOptions{{Family: "ipv5"}, {Family: IPv6, RouterAdvertisements: true}, {Family: Dual, RouterAdvertisements: true}} {
		if n, err := NewNetwork(ctx, o); err == nil {
			n.Close()
			t.Errorf("NewNetwork(%+v) succeeded, want an error", o)
		} else if !strings.Contains(err.Error(), "Family") {
			t.Errorf("NewNetwork(%+v): %v, want one naming the Family", o, err)
		}
	}
}
