package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/internal/testlog"
)

// binary is the anvild binary the tests run, built once.
var binary struct {
	once sync.Once
	path string
	err  error
	dir  string
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binary.dir != "" {
		os.RemoveAll(binary.dir)
	}
	os.Exit(code)
}

func anvildBinary(t *testing.T) string {
	t.Helper()
	binary.once.Do(func() {
		binary.dir, binary.err = os.MkdirTemp("", "anvild-test-")
		if binary.err != nil {
			return
		}
		binary.path = filepath.Join(binary.dir, "anvild")
		out, err := exec.Command("go", "build", "-o", binary.path, ".").CombinedOutput()
		if err != nil {
			binary.err = &buildError{out: string(out), err: err}
		}
	})
	if binary.err != nil {
		t.Fatal(binary.err)
	}
	return binary.path
}

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return "go build: " + e.err.Error() + "\n" + e.out }

// daemonProc is a running anvild.
type daemonProc struct {
	cmd    *exec.Cmd
	URL    string
	stdout *testlog.Buffer // the lines before the API's
	stderr *testlog.Buffer
	done   chan error
}

// waitStdout waits until anvild has printed line, which may come after
// the API's line that startAnvild waits for: the reading goroutine
// copies each line as it arrives. It fails the test if anvild exits or
// has not printed it within startAnvild's own bound.
func (d *daemonProc) waitStdout(t *testing.T, line string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for !strings.Contains(d.stdout.String(), line+"\n") {
		select {
		case err := <-d.done:
			d.done <- err
			t.Fatalf("anvild exited (%v) before printing %q; stdout %q", err, line, d.stdout.String())
		case <-deadline:
			t.Fatalf("anvild has not printed %q; stdout %q", line, d.stdout.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// startAnvild runs the binary on a free 127.0.0.1 port with a fresh state
// directory and waits for its "Ironic API on <url>" line. It is stopped
// (SIGTERM, then SIGKILL after 20 s) when the test ends unless stop was
// called.
func startAnvild(t *testing.T, args ...string) *daemonProc {
	t.Helper()
	return startAnvildBinary(t, anvildBinary(t), args...)
}

// startAnvildBinary is startAnvild with the anvild executable bin. The
// default plugin directory under XDG_DATA_HOME is an empty one of the
// test's, so that plugins installed on the machine play no part.
func startAnvildBinary(t *testing.T, bin string, args ...string) *daemonProc {
	t.Helper()
	full := append([]string{"--host-ip", "127.0.0.1", "--port", "0", "--state-dir", t.TempDir(), "--host", "anvild-test"}, args...)
	cmd := exec.Command(bin, full...)
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME=", "XDG_DATA_HOME="+t.TempDir())
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	d := &daemonProc{cmd: cmd, stdout: &testlog.Buffer{}, stderr: &testlog.Buffer{}, done: make(chan error, 1)}
	cmd.Stderr = d.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			_, _ = d.stdout.Write([]byte(sc.Text() + "\n"))
			if u, ok := strings.CutPrefix(sc.Text(), "anvild: Ironic API on "); ok {
				urls <- u
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() { d.done <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState != nil {
			return
		}
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-d.done
		}
	})
	select {
	case d.URL = <-urls:
	case err := <-d.done:
		t.Fatalf("anvild exited before serving: %v\n%s", err, d.stderr)
	case <-time.After(30 * time.Second):
		t.Fatalf("anvild did not start within 30 s\n%s", d.stderr)
	}
	return d
}

// stop sends SIGTERM and returns how long the exit took and its error.
func (d *daemonProc) stop(t *testing.T, bound time.Duration) (time.Duration, error) {
	t.Helper()
	start := time.Now()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-d.done:
		return time.Since(start), err
	case <-time.After(bound):
		_ = d.cmd.Process.Kill()
		<-d.done
		t.Fatalf("anvild still running %s after SIGTERM\n%s", bound, d.stderr)
	}
	return 0, nil
}

func get(t *testing.T, c *http.Client, url string, hdr ...string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(body)
}

func TestAnvildServesAndStopsOnSIGTERM(t *testing.T) {
	d := startAnvild(t)
	hc := &http.Client{Timeout: 10 * time.Second}
	code, hdr, body := get(t, hc, d.URL+"/")
	var root struct {
		Name           string `json:"name"`
		DefaultVersion struct {
			Version    string `json:"version"`
			MinVersion string `json:"min_version"`
		} `json:"default_version"`
	}
	if err := json.Unmarshal([]byte(body), &root); err != nil || code != 200 {
		t.Fatalf("GET /: %d %q (%v)", code, body, err)
	}
	if root.Name != "OpenStack Ironic API" || root.DefaultVersion.MinVersion != "1.1" || hdr.Get("X-OpenStack-Ironic-API-Maximum-Version") != root.DefaultVersion.Version {
		t.Fatalf("GET /: %+v, max header %q", root, hdr.Get("X-OpenStack-Ironic-API-Maximum-Version"))
	}
	code, _, body = get(t, hc, d.URL+"/metrics")
	if code != 200 || !strings.Contains(body, "anvil_conductor_") || !strings.Contains(body, "go_goroutines") {
		t.Fatalf("GET /metrics: %d, no conductor or Go metrics in\n%.2000s", code, body)
	}
	// The agent endpoints share the listener: a lookup without addresses
	// is the agent handler's 400 naming them, not the API's 404.
	code, _, body = get(t, hc, d.URL+"/v1/lookup", "X-OpenStack-Ironic-API-Version", "1.22")
	if code != http.StatusBadRequest || !strings.Contains(body, "addresses (MAC addresses)") {
		t.Fatalf("GET /v1/lookup: %d %s, want the agent handler's 400", code, body)
	}
	took, err := d.stop(t, 15*time.Second)
	if err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, d.stderr)
	}
	t.Logf("exited 0 %s after SIGTERM", took.Round(time.Millisecond))
	for _, want := range []string{"signal received: shutting down", "conductor draining", "anvild stopped"} {
		if !strings.Contains(d.stderr.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, d.stderr)
		}
	}
}

func TestAnvildVersion(t *testing.T) {
	out, err := exec.Command(anvildBinary(t), "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(out), "anvild github.com/anvilmetal/anvil ") || !strings.Contains(string(out), "go1.") {
		t.Fatalf("--version printed %q", out)
	}
}

func TestAnvildBadConfigExits2(t *testing.T) {
	cmd := exec.Command(anvildBinary(t), "--port", "http")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !asExit(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "[api]port") {
		t.Fatalf("exit %v, output %q; want 2 naming [api]port", err, out)
	}
}

func asExit(err error, ee **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	*ee = e
	return ok
}

// selfSigned writes a certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "anvild-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

func TestAnvildTLSAndHTTPBasic(t *testing.T) {
	certFile, keyFile, pool := selfSigned(t)
	// Ironic's own test user file: myName / myPassword.
	htpasswd := filepath.Join(t.TempDir(), "htpasswd")
	if err := os.WriteFile(htpasswd, []byte("myName:$2y$05$lE3eGtyj41jZwrzS87KTqe6.JETVCWBkc32C63UP2aYrGoYOEpbJm\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	conf := writeConf(t, "[DEFAULT]\nauth_strategy = http_basic\nhttp_basic_auth_user_file = "+htpasswd+"\n")
	d := startAnvild(t, "--config-file", conf, "--tls-cert", certFile, "--tls-key", keyFile)
	if !strings.HasPrefix(d.URL, "https://") {
		t.Fatalf("URL %s, want https", d.URL)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if code, _, _ := get(t, hc, d.URL+"/"); code != 200 {
		t.Fatalf("GET / over TLS: %d", code)
	}
	code, hdr, _ := get(t, hc, d.URL+"/v1/nodes")
	if code != 401 || hdr.Get("WWW-Authenticate") != `Basic realm="Baremetal API"` {
		t.Fatalf("GET /v1/nodes without credentials: %d %v", code, hdr)
	}
	if code, _, body := get(t, hc, d.URL+"/v1/nodes", "Authorization", "Basic bXlOYW1lOm15UGFzc3dvcmQ="); code != 200 {
		t.Fatalf("GET /v1/nodes with credentials: %d %s", code, body)
	}
	// The web UI, the consoles and /metrics sit behind the same
	// credentials.
	for _, path := range []string{"/metrics", "/ui/", "/ui/api/fleet", "/ui/api/events", "/console/assets/console.js", "/console/x?token=y"} {
		code, hdr, _ := get(t, hc, d.URL+path)
		if code != 401 || hdr.Get("WWW-Authenticate") != `Basic realm="Baremetal API"` {
			t.Fatalf("GET %s without credentials: %d %v", path, code, hdr)
		}
	}
	if code, _, body := get(t, hc, d.URL+"/ui/", "Authorization", "Basic bXlOYW1lOm15UGFzc3dvcmQ="); code != 200 || !strings.Contains(body, "fleet.js") {
		t.Fatalf("GET /ui/ with credentials: %d %s", code, body)
	}
	if code, _, body := get(t, hc, d.URL+"/metrics", "Authorization", "Basic bXlOYW1lOm15UGFzc3dvcmQ="); code != 200 || !strings.Contains(body, "anvil_conductor_") {
		t.Fatalf("GET /metrics with credentials: %d %.500s", code, body)
	}
	if _, err := d.stop(t, 15*time.Second); err != nil {
		t.Fatalf("exit: %v", err)
	}
}

// TestAnvildWebUI checks what anvild mounts beside the API: the web UI
// (its pages, fleet and stream) and the consoles' assets, and that
// [anvil]web_ui = false leaves them out.
func TestAnvildWebUI(t *testing.T) {
	d := startAnvild(t)
	hc := &http.Client{Timeout: 10 * time.Second}
	d.waitStdout(t, "anvild: web UI on "+d.URL+"/ui/")
	for _, tc := range []struct {
		path, has string
	}{
		{"/ui/", "fleet.js"}, {"/ui/api/fleet", `"conductor":"anvild-test"`}, {"/ui/assets/node.js", "EventSource"},
		{"/console/assets/console.js", "WebSocket"},
	} {
		if code, _, body := get(t, hc, d.URL+tc.path); code != 200 || !strings.Contains(body, tc.has) {
			t.Errorf("GET %s: %d, want 200 with %q", tc.path, code, tc.has)
		}
	}
	if code, _, _ := get(t, hc, d.URL+"/console/nope?token=x"); code != 404 {
		t.Errorf("console page of a node without a console: %d, want 404", code)
	}
	// The event stream stays open past anvild's write timeout's reach:
	// it answers headers at once and flushes.
	req, _ := http.NewRequest("GET", d.URL+"/ui/api/events", nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(resp.Body).ReadString('\n')
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(line, ": anvil fleet stream") {
		t.Fatalf("event stream: %d %q", resp.StatusCode, line)
	}
	if _, err := d.stop(t, 15*time.Second); err != nil {
		t.Fatalf("exit: %v", err)
	}

	off := startAnvild(t, "--web-ui=false")
	if code, _, _ := get(t, hc, off.URL+"/ui/"); code != 404 {
		t.Fatalf("GET /ui/ with the web UI off: %d, want 404", code)
	}
}

// TestAnvildLoadsDriverPlugins builds the redfish plugin into a plugin
// directory and enables its hardware type beside fake-hardware.
func TestAnvildLoadsDriverPlugins(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a plugin; skipped with -short")
	}
	dir := t.TempDir()
	out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "anvil-driver-redfish"), "../../plugins/redfish").CombinedOutput()
	if err != nil {
		t.Fatalf("go build the redfish plugin: %v\n%s", err, out)
	}
	d := startAnvild(t, "--plugin-dir", dir, "--enabled-hardware-types", "fake-hardware,redfish")
	if !strings.Contains(d.stderr.String(), `msg="driver plugin" name=redfish`) {
		t.Fatalf("no plugin line in the log:\n%s", d.stderr)
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	code, _, body := get(t, hc, d.URL+"/v1/drivers", "X-OpenStack-Ironic-API-Version", "1.78")
	switch code {
	case http.StatusOK:
		if !strings.Contains(body, `"redfish"`) || !strings.Contains(body, `"fake-hardware"`) {
			t.Fatalf("GET /v1/drivers lacks redfish or fake-hardware: %s", body)
		}
	case http.StatusNotFound:
		t.Log("GET /v1/drivers is not served by this build of ironicapi; checked the plugin load only")
	default:
		t.Fatalf("GET /v1/drivers: %d %s", code, body)
	}
	if _, err := d.stop(t, 15*time.Second); err != nil {
		t.Fatalf("exit: %v\n%s", err, d.stderr)
	}
}

// TestAnvildBootServer runs the boot server's HTTP side on 127.0.0.1 and
// fetches the iPXE entry script it serves every machine.
func TestAnvildBootServer(t *testing.T) {
	for _, f := range []string{"undionly.kpxe", "snponly.efi", "ipxe.efi"} {
		if _, err := os.Stat(filepath.Join("/usr/lib/ipxe", f)); err != nil {
			t.Skipf("Debian's ipxe package is not installed (%s)", f)
		}
	}
	d := startAnvild(t, "--netboot", "--netboot-http-listen", "127.0.0.1:0", "--config-file",
		writeConf(t, "[deploy]\nhttp_url = http://127.0.0.1:8080\n[pxe]\ntftp_server = 127.0.0.1\n"))
	var boot string
	for _, line := range strings.Split(d.stdout.String(), "\n") {
		if a, ok := strings.CutPrefix(line, "anvild: boot server HTTP on "); ok {
			boot = "http://" + a
		}
	}
	if boot == "" {
		t.Fatalf("no boot server line on stdout: %q", d.stdout.String())
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	code, _, body := get(t, hc, boot+"/boot.ipxe")
	if code != 200 || !strings.HasPrefix(body, "#!ipxe") {
		t.Fatalf("GET /boot.ipxe: %d %q", code, body)
	}
	if _, err := d.stop(t, 15*time.Second); err != nil {
		t.Fatalf("exit: %v\n%s", err, d.stderr)
	}
}

// TestIPv6Listen runs anvild with [api]host_ip = ::1: the Ironic API and
// the agents' endpoints answer on [::1], and the URL agents are given
// (ipa-api-url) has the literal in brackets.
func TestIPv6Listen(t *testing.T) {
	if ln, err := net.Listen("tcp", "[::1]:0"); err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	} else {
		ln.Close()
	}
	d := startAnvild(t, "--host-ip", "::1")
	if !strings.HasPrefix(d.URL, "http://[::1]:") {
		t.Fatalf("API URL %q, want http://[::1]:port", d.URL)
	}
	resp, err := http.Get(d.URL + "/v1/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/ over IPv6: %s", resp.Status)
	}
	req, _ := http.NewRequest(http.MethodGet, d.URL+"/v1/lookup?addresses=52:54:00:00:00:61", nil)
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.68")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "error_message") {
		t.Fatalf("agent lookup over IPv6: %s %s, want Ironic's 404", resp.Status, body)
	}
	for _, tc := range []struct {
		host string
		want string
	}{{"fd00:a6::1", "http://[fd00:a6::1]:6385"}, {"192.0.2.1", "http://192.0.2.1:6385"}, {"::", ""}} {
		if got := agentAPIURL(&Config{HostIP: tc.host, Port: 6385}); got != tc.want {
			t.Errorf("agentAPIURL(host_ip %s) = %q, want %q", tc.host, got, tc.want)
		}
	}
}

// TestAnvildFindsPluginsBesideItself is what go install gives: anvild and
// anvil-driver-redfish in one directory. With no flag anvild enables
// Ironic's defaults for what it finds: the redfish hardware type (no ipmi
// plugin, no fake-hardware), and a node registered as Metal3's
// baremetal-operator registers it (inspect_interface agent) is accepted.
func TestAnvildFindsPluginsBesideItself(t *testing.T) {
	if testing.Short() {
		t.Skip("builds anvild and a plugin; skipped with -short")
	}
	dir := t.TempDir()
	out, err := exec.Command("go", "build", "-o", dir+"/", ".", "../anvil-driver-redfish").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	d := startAnvildBinary(t, filepath.Join(dir, "anvild"))
	hc := &http.Client{Timeout: 10 * time.Second}
	code, _, body := get(t, hc, d.URL+"/v1/drivers", "X-OpenStack-Ironic-API-Version", "1.81")
	if code != 200 {
		t.Fatalf("GET /v1/drivers: %d %s", code, body)
	}
	var drivers struct{ Drivers []struct{ Name string } }
	if err := json.Unmarshal([]byte(body), &drivers); err != nil {
		t.Fatal(err)
	}
	if len(drivers.Drivers) != 1 || drivers.Drivers[0].Name != "redfish" {
		t.Fatalf("drivers %+v, want redfish alone\n%s", drivers.Drivers, d.stderr)
	}
	req, _ := http.NewRequest(http.MethodPost, d.URL+"/v1/nodes", strings.NewReader(
		`{"name":"bmh-0","driver":"redfish","inspect_interface":"agent","driver_info":{"redfish_address":"http://127.0.0.1:1","redfish_system_id":"/redfish/v1/Systems/1"}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.81")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	nb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /v1/nodes with inspect_interface agent: %d %s", resp.StatusCode, nb)
	}
	var node map[string]any
	if err := json.Unmarshal(nb, &node); err != nil {
		t.Fatal(err)
	}
	if node["inspect_interface"] != "agent" || node["raid_interface"] != "redfish" || node["deploy_interface"] != "autodetect" {
		t.Fatalf("node interfaces: inspect %v raid %v deploy %v", node["inspect_interface"], node["raid_interface"], node["deploy_interface"])
	}
	if _, err := d.stop(t, 15*time.Second); err != nil {
		t.Fatalf("exit: %v\n%s", err, d.stderr)
	}
}

// TestAnvildWithoutPluginsFallsBackToFakeHardware: no plugin anywhere, no
// flag: anvild says so and serves fake-hardware, as the README shows.
func TestAnvildWithoutPluginsFallsBackToFakeHardware(t *testing.T) {
	d := startAnvild(t)
	if !strings.Contains(d.stderr.String(), "no driver plugin for Ironic's default hardware types (ipmi, redfish)") {
		t.Fatalf("no warning about the missing plugins:\n%s", d.stderr)
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	code, _, body := get(t, hc, d.URL+"/v1/drivers")
	if code != 200 || !strings.Contains(body, `"fake-hardware"`) || strings.Contains(body, `"redfish"`) {
		t.Fatalf("GET /v1/drivers: %d %s", code, body)
	}
	if _, err := d.stop(t, 15*time.Second); err != nil {
		t.Fatalf("exit: %v\n%s", err, d.stderr)
	}
}
