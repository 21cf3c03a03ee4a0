package vmlab

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/anvilmetal/anvil/netboot/stage"
)

// IPXEDir is where Debian's ipxe package puts undionly.kpxe and
// snponly.efi.
const IPXEDir = "/usr/lib/ipxe"

// DnsmasqBootServer is the reference boot server the harness is proven
// with: Debian's dnsmasq on the bridge as DHCP and TFTP server (iPXE for
// PXE firmware, the script URL for iPXE), and a Go HTTP server in the
// namespace serving the script, kernel and initramfs. It records DHCP and
// TFTP stages from dnsmasq's log and HTTP stages from the Go server.
func DnsmasqBootServer(opts DnsmasqOptions) BootServer {
	return func(ctx context.Context, s BootSetup) (func() error, error) {
		return startDnsmasqReference(ctx, s, opts)
	}
}

// DnsmasqOptions configure the reference boot server.
type DnsmasqOptions struct {
	// Missing are HTTP paths ("/vmlinuz", "/initrd.gz", "/boot.ipxe")
	// answered 404: a boot server that lost an image, for tests of how a
	// failed boot is reported.
	Missing []string
}

func startDnsmasqReference(ctx context.Context, s BootSetup, opts DnsmasqOptions) (func() error, error) {
	if _, err := exec.LookPath("dnsmasq"); err != nil {
		return nil, fmt.Errorf("%w: no dnsmasq (Debian package dnsmasq-base)", ErrUnavailable)
	}
	tftpRoot := filepath.Join(s.Dir, "tftp")
	if err := os.MkdirAll(tftpRoot, 0o755); err != nil {
		return nil, err
	}
	for _, f := range []string{"undionly.kpxe", "snponly.efi"} {
		if err := copyFile(filepath.Join(IPXEDir, f), filepath.Join(tftpRoot, f)); err != nil {
			return nil, fmt.Errorf("%w: %v (Debian package ipxe)", ErrUnavailable, err)
		}
	}

	var ln net.Listener
	if err := s.Network.Do(func() error {
		var err error
		ln, err = net.Listen("tcp", net.JoinHostPort(s.ServerAddr.String(), "0"))
		return err
	}); err != nil {
		return nil, fmt.Errorf("vmlab: HTTP listener in the namespace: %w", err)
	}
	base := "http://" + ln.Addr().String()
	script := "#!ipxe\n" +
		"kernel " + base + "/vmlinuz initrd=initrd.gz " + strings.Join(s.Params, " ") + "\n" +
		"initrd " + base + "/initrd.gz\n" +
		"boot\n"
	srv := &http.Server{
		Handler:           referenceHTTP(s, script, opts.Missing),
		ReadHeaderTimeout: 10 * time.Second,
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	pidFile := filepath.Join(s.Dir, "dnsmasq.pid")
	args := []string{
		"--conf-file=/dev/null", // not the host's /etc/dnsmasq.conf
		"--keep-in-foreground", "--log-facility=-", "--log-dhcp",
		"--port=0", "--no-resolv", "--no-hosts",
		"--user=root", "--group=root",
		"--interface=" + s.Interface, "--bind-interfaces",
		"--dhcp-range=" + s.PoolStart.String() + "," + s.PoolEnd.String() + ",1h",
		"--dhcp-authoritative",
		// dnsmasq pings an address (3 s) before offering it; the
		// namespace holds nobody else.
		"--no-ping",
		"--dhcp-leasefile=" + filepath.Join(s.Dir, "dnsmasq.leases"),
		"--pid-file=" + pidFile,
		"--enable-tftp", "--tftp-root=" + tftpRoot,
		"--dhcp-userclass=set:ipxe,iPXE",
		"--dhcp-match=set:efi64,option:client-arch,7",
		"--dhcp-match=set:efi64,option:client-arch,9",
		"--dhcp-boot=tag:!ipxe,tag:!efi64,undionly.kpxe",
		"--dhcp-boot=tag:!ipxe,tag:efi64,snponly.efi",
		"--dhcp-boot=tag:ipxe," + base + "/boot.ipxe",
	}
	cmd := s.Network.Command("dnsmasq", args...)
	logR, logW := io.Pipe()
	cmd.Stdout, cmd.Stderr = logW, logW
	proc, err := s.Network.Start("dnsmasq", cmd)
	if err != nil {
		logW.Close()
		_ = srv.Close()
		return nil, err
	}
	tail := &boundedBuffer{max: 64 << 10}
	logDone := make(chan struct{})
	go func() {
		defer close(logDone)
		sc := bufio.NewScanner(logR)
		sc.Buffer(make([]byte, 4096), 64<<10)
		for sc.Scan() {
			line := sc.Text()
			_, _ = tail.Write([]byte(line + "\n"))
			if r, ok := parseDnsmasqLine(line, s.MAC, tftpRoot); ok {
				r.Node = s.Node
				s.Observer.ObserveBootStage(r)
			}
		}
		_, _ = io.Copy(io.Discard, logR)
	}()
	go func() {
		<-proc.Done()
		logW.Close()
	}()

	// dnsmasq is ready once its PID file exists (written after its
	// sockets are bound).
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := os.Stat(pidFile); err == nil {
			break
		}
		select {
		case <-proc.Done():
			_ = srv.Close()
			<-logDone
			return nil, fmt.Errorf("vmlab: dnsmasq exited at start: %s", tail.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = proc.Stop(2 * time.Second)
			_ = srv.Close()
			<-logDone
			return nil, fmt.Errorf("vmlab: dnsmasq wrote no PID file in 15 s: %s", tail.String())
		}
	}
	var once sync.Once
	var stopErr error
	return func() error {
		once.Do(func() {
			errs := []error{proc.Stop(5 * time.Second)}
			<-logDone
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			errs = append(errs, srv.Shutdown(sctx))
			if err := <-served; !errors.Is(err, http.ErrServerClosed) {
				errs = append(errs, err)
			}
			stopErr = errors.Join(errs...)
		})
		return stopErr
	}, nil
}

// referenceHTTP serves the script and the two images, and records a stage
// for each response it finished.
func referenceHTTP(s BootSetup, script string, missing []string) http.Handler {
	files := map[string]struct {
		path  string
		stage stage.Stage
	}{
		"/vmlinuz":   {s.Kernel, stage.Kernel},
		"/initrd.gz": {s.Initrd, stage.Ramdisk},
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		rec := stage.Record{Node: s.Node, MAC: s.MAC, Addr: host, File: r.URL.Path}
		if containsString(missing, r.URL.Path) {
			http.NotFound(w, r)
			return
		}
		if r.URL.Path == "/boot.ipxe" {
			w.Header().Set("Content-Type", "text/plain")
			_, _ = io.WriteString(w, script)
			rec.Stage, rec.At = stage.Script, time.Now()
			s.Observer.ObserveBootStage(rec)
			return
		}
		f, ok := files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		file, err := os.Open(f.path)
		if err != nil {
			http.Error(w, "unavailable", http.StatusInternalServerError)
			return
		}
		defer file.Close()
		st, err := file.Stat()
		if err != nil {
			http.Error(w, "unavailable", http.StatusInternalServerError)
			return
		}
		cw := &countingWriter{ResponseWriter: w}
		http.ServeContent(cw, r, "", st.ModTime(), file)
		rec.Stage, rec.At, rec.Bytes, rec.Duration = f.stage, time.Now(), cw.n, time.Since(start)
		s.Observer.ObserveBootStage(rec)
	})
}

type countingWriter struct {
	http.ResponseWriter
	n int64
}

func (w *countingWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	w.n += int64(n)
	return n, err
}

// dnsmasq log lines the reference turns into stage records:
//
//	dnsmasq-dhcp[7]: DHCPDISCOVER(br0) 52:54:00:a0:00:01
//	dnsmasq-dhcp[7]: DHCPOFFER(br0) 192.0.2.117 52:54:00:a0:00:01
//	dnsmasq-dhcp[7]: DHCPACK(br0) 192.0.2.117 52:54:00:a0:00:01
//	dnsmasq-tftp[7]: sent /tmp/x/tftp/undionly.kpxe to 192.0.2.117
//
// and, with --log-dhcp, "... vendor class: PXEClient:Arch:00007:...".
var (
	dnsmasqDHCP = regexp.MustCompile(`DHCP(DISCOVER|OFFER|ACK)\([^)]*\) (?:(\d+\.\d+\.\d+\.\d+) )?([0-9a-f:]{17})`)
	dnsmasqTFTP = regexp.MustCompile(`dnsmasq-tftp.*: sent (\S+) to (\d+\.\d+\.\d+\.\d+)`)
)

func parseDnsmasqLine(line, mac, tftpRoot string) (stage.Record, bool) {
	if m := dnsmasqDHCP.FindStringSubmatch(line); m != nil {
		if m[3] != mac {
			return stage.Record{}, false
		}
		r := stage.Record{MAC: m[3], Addr: m[2], At: time.Now()}
		switch m[1] {
		case "DISCOVER":
			r.Stage = stage.DHCPDiscover
		case "OFFER":
			r.Stage = stage.DHCPOffer
		case "ACK":
			r.Stage = stage.DHCPAck
		}
		return r, true
	}
	if m := dnsmasqTFTP.FindStringSubmatch(line); m != nil {
		name := strings.TrimPrefix(strings.TrimPrefix(m[1], tftpRoot), "/")
		return stage.Record{MAC: mac, Stage: stage.TFTPSent, File: name, Addr: m[2], At: time.Now()}, true
	}
	return stage.Record{}, false
}
