package metal3_test

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/anvilmetal/anvil/deploy/metal3"
)

// bmoConfigMap is ironic-deployment/default/ironic_bmo_configmap.env of
// the baremetal-operator, with the provisioning interface's address
// given (the test machine has no eth2).
var bmoConfigMap = map[string]string{
	"HTTP_PORT": "6180", "PROVISIONING_INTERFACE": "eth2", "DHCP_RANGE": "172.22.0.10,172.22.0.100",
	"DEPLOY_KERNEL_URL":  "http://172.22.0.2:6180/images/ironic-python-agent.kernel",
	"DEPLOY_RAMDISK_URL": "http://172.22.0.2:6180/images/ironic-python-agent.initramfs",
	"IRONIC_ENDPOINT":    "http://172.22.0.2:6385/v1/", "CACHEURL": "http://172.22.0.1/images",
	"IRONIC_KERNEL_PARAMS": "console=ttyS0", "IRONIC_INSPECTOR_VLAN_INTERFACES": "all", "USE_IRONIC_INSPECTOR": "false",
}

func env(vars map[string]string, files ...string) metal3.Env {
	return metal3.Env{
		Getenv: func(k string) string { return vars[k] },
		Exists: func(p string) bool {
			for _, f := range files {
				if f == p {
					return true
				}
			}
			return false
		},
		InterfaceIP: func(name string) (netip.Addr, error) {
			if name == "eth2" {
				return netip.MustParseAddr("172.22.0.2"), nil
			}
			return netip.Addr{}, errors.New("no such interface")
		},
	}
}

func with(base map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// TestRenderBMOConfigMap renders BMO's default ConfigMap and checks the
// options it becomes.
func TestRenderBMOConfigMap(t *testing.T) {
	r, err := metal3.Render(env(bmoConfigMap))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"host_ip = 172.22.0.2", "port = 6385", "public_endpoint = http://172.22.0.2:6385",
		"auth_strategy = noauth", "state_path = /var/lib/anvil",
		"deploy_kernel = http://172.22.0.2:6180/images/ironic-python-agent.kernel",
		"deploy_ramdisk = http://172.22.0.2:6180/images/ironic-python-agent.initramfs",
		"kernel_append_params = console=ttyS0", "fast_track = true",
		"http_url = http://172.22.0.2:6180", "http_root = /shared/html", "http_root_listen = 172.22.0.2:6180",
	} {
		if !strings.Contains(r.INI, want+"\n") {
			t.Errorf("rendered configuration lacks %q:\n%s", want, r.INI)
		}
	}
	notes := strings.Join(r.Notes, "\n")
	for _, v := range []string{"DHCP_RANGE", "CACHEURL", "IRONIC_ENDPOINT", "USE_IRONIC_INSPECTOR", "noauth"} {
		if !strings.Contains(notes, v) {
			t.Errorf("notes lack %s: %s", v, notes)
		}
	}
}

// TestRenderRefusesBadValues: a value that cannot be used names the
// variable and the expectation, and never a DSN's password.
func TestRenderRefusesBadValues(t *testing.T) {
	for _, tc := range []struct {
		vars map[string]string
		want string
	}{
		{with(bmoConfigMap, "PROVISIONING_IP", "172.22.0.300"), `PROVISIONING_IP="172.22.0.300": expected an IP address`},
		{with(bmoConfigMap, "PROVISIONING_INTERFACE", "eth9"), `PROVISIONING_INTERFACE="eth9": expected an interface with an address`},
		{with(bmoConfigMap, "IRONIC_LISTEN_PORT", "http"), `IRONIC_LISTEN_PORT="http": expected a TCP port`},
		{with(bmoConfigMap, "IRONIC_FAST_TRACK", "maybe"), `IRONIC_FAST_TRACK="maybe"`},
		{with(bmoConfigMap, "IRONIC_CERT_FILE", "/c.pem"), "set together with IRONIC_KEY_FILE"},
		{with(bmoConfigMap, "ANVIL_DATABASE_CONNECTION", "mysql://u:s3cret@db/ironic"), "a postgresql:// or sqlite:/// DSN"},
	} {
		_, err := metal3.Render(env(tc.vars))
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("error %v, want one containing %q (and no password)", err, tc.want)
		}
	}
}

var (
	buildOnce sync.Once
	anvildBin string
	buildErr  error
)

// anvild builds cmd/anvild once for the package's tests.
func anvild(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "anvil-metal3-test")
		if err != nil {
			buildErr = err
			return
		}
		anvildBin = filepath.Join(dir, "anvild")
		out, err := exec.Command("go", "build", "-o", anvildBin, "../../cmd/anvild").CombinedOutput()
		if err != nil {
			buildErr = errors.New(string(out))
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return anvildBin
}

// runAnvild runs bin on the configuration file conf, listening on a free
// port of 127.0.0.1 (flags win over the file), and returns its API URL.
func runAnvild(t *testing.T, bin, conf string) string {
	t.Helper()
	cmd := exec.Command(bin, "--config-file", conf, "--host-ip", "127.0.0.1", "--port", "0", "--http-root-listen", "127.0.0.1:0", "--state-dir", t.TempDir(), "--host", "metal3-test")
	cmd.Env = append(os.Environ(), "XDG_STATE_HOME=", "XDG_DATA_HOME="+t.TempDir())
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	var mu sync.Mutex
	cmd.Stderr = writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return stderr.Write(p) })
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	urls := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(sc.Text(), "anvild: Ironic API on "); ok {
				urls <- u
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case u := <-urls:
		return u
	case err := <-done:
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("anvild exited on the rendered configuration: %v\n%s", err, stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatal("anvild did not start within 60 s")
	}
	return ""
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestAnvildRunsEachRenderedConfig renders the configurations of BMO's
// ironic-deployment variants (default; basic-auth and TLS components;
// PostgreSQL) and runs anvild on each: it must accept the file and serve
// the Ironic API as BMO reaches it (credentials, TLS).
func TestAnvildRunsEachRenderedConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs anvild")
	}
	bin := anvild(t)
	certFile, keyFile, pool := selfSigned(t)
	hash, err := bcrypt.GenerateFromPassword([]byte("bmo-secret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	htpasswd := filepath.Join(t.TempDir(), "htpasswd")
	if err := os.WriteFile(htpasswd, []byte("ironic-user:"+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		vars   map[string]string
		tls    bool
		user   string
		needPG bool
	}{
		{name: "default", vars: bmoConfigMap},
		{name: "basic-auth_tls", vars: with(bmoConfigMap, "IRONIC_HTPASSWD_FILE", htpasswd, "IRONIC_CERT_FILE", certFile, "IRONIC_KEY_FILE", keyFile), tls: true, user: "ironic-user"},
		{name: "postgres", vars: with(bmoConfigMap, "ANVIL_DATABASE_CONNECTION", os.Getenv("ANVIL_TEST_POSTGRES_DSN"), "ANVIL_HOST", "conductor-a"), needPG: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.needPG && os.Getenv("ANVIL_TEST_POSTGRES_DSN") == "" {
				t.Skip("ANVIL_TEST_POSTGRES_DSN unset")
			}
			r, err := metal3.Render(env(tc.vars))
			if err != nil {
				t.Fatal(err)
			}
			conf := filepath.Join(t.TempDir(), "anvild.conf")
			if err := os.WriteFile(conf, []byte(r.INI), 0o600); err != nil {
				t.Fatal(err)
			}
			u := runAnvild(t, bin, conf)
			c := &http.Client{Timeout: 10 * time.Second}
			if tc.tls {
				if !strings.HasPrefix(u, "https://") {
					t.Fatalf("API at %s, want https", u)
				}
				c.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
			}
			req, _ := http.NewRequest(http.MethodGet, u+"/v1/nodes", nil)
			req.Header.Set("X-OpenStack-Ironic-API-Version", "1.110")
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			want := http.StatusOK
			if tc.user != "" {
				want = http.StatusUnauthorized
			}
			if resp.StatusCode != want {
				t.Fatalf("GET /v1/nodes without credentials: %d, want %d", resp.StatusCode, want)
			}
			if tc.user != "" {
				req.SetBasicAuth(tc.user, "bmo-secret")
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("GET /v1/nodes with BMO's credentials: %d", resp.StatusCode)
				}
			}
		})
	}
}

func selfSigned(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "anvil-metal3-test"},
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
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if err := os.WriteFile(certFile, pemBlock("CERTIFICATE", der), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pemBlock("EC PRIVATE KEY", kder), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}
