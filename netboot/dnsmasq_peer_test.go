package netboot

import (
	"bufio"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDnsmasqReadsTheFiles hands the golden files to the real dnsmasq
// (Debian's dnsmasq-base) as --dhcp-hostsdir and --dhcp-optsdir, on the
// loopback interface and an unprivileged port pair, and checks that it
// reads every file and refuses no line. It stops dnsmasq by its PID.
func TestDnsmasqReadsTheFiles(t *testing.T) {
	bin, err := exec.LookPath("dnsmasq")
	if err != nil {
		t.Skip("dnsmasq not installed: apt-get install dnsmasq-base")
	}
	root := t.TempDir()
	hosts, opts := filepath.Join(root, "hosts"), filepath.Join(root, "opts")
	golden, err := os.ReadFile(filepath.Join("testdata", "dnsmasq.golden"))
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, part := range strings.Split(string(golden), "==> ")[1:] {
		name, body, _ := strings.Cut(part, "\n")
		dir, file, _ := strings.Cut(name, "/")
		writeFile(t, filepath.Join(root, dir, file), []byte(body))
		want++
	}
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := pc.LocalAddr().(*net.UDPAddr).Port
	pc.Close()
	cmd := exec.Command(bin, "--keep-in-foreground", "--no-daemon", "--conf-file=/dev/null", "--port=0",
		"--interface=lo", "--bind-interfaces", "--pid-file="+filepath.Join(root, "pid"),
		"--dhcp-leasefile="+filepath.Join(root, "leases"),
		"--dhcp-alternate-port="+strconv.Itoa(port)+","+strconv.Itoa(port+1),
		"--dhcp-range=127.0.0.50,127.0.0.60", "--dhcp-userclass=set:ipxe,iPXE",
		"--dhcp-hostsdir="+hosts, "--dhcp-optsdir="+opts)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		if p, err := os.FindProcess(pid); err == nil {
			p.Kill()
		}
		cmd.Wait()
	})
	// The reader ends when dnsmasq is stopped (its stderr closes); it
	// never blocks on a test that stopped listening.
	lines := make(chan string, 256)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	read := 0
	timeout := time.After(10 * time.Second)
	for read < want {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("dnsmasq exited after reading %d of %d files", read, want)
			}
			switch {
			case strings.Contains(l, "bad ") || strings.Contains(l, "error") || strings.Contains(l, "failed"):
				t.Fatalf("dnsmasq: %s", l)
			case strings.Contains(l, "read "+hosts), strings.Contains(l, "read "+opts):
				read++
			}
		case <-timeout:
			t.Fatalf("dnsmasq read %d of %d files in 10 s", read, want)
		}
	}
	// dnsmasq reports a bad line after the file's "read" line: give it a
	// moment to say so.
	grace := time.After(300 * time.Millisecond)
	for {
		select {
		case l, ok := <-lines:
			if ok && strings.Contains(l, "bad ") {
				t.Fatalf("dnsmasq: %s", l)
			}
			if !ok {
				return
			}
		case <-grace:
			return
		}
	}
}
