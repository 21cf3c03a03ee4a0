package rfdriver

import (
	"context"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/plugins/redfish/redfishtest"
)

func noSleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

func newServer(t *testing.T, opts redfishtest.Options) *redfishtest.Server {
	t.Helper()
	s, err := redfishtest.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func info(t *testing.T, s *redfishtest.Server, extra map[string]any) Info {
	t.Helper()
	di := map[string]any{"redfish_address": s.URL(), "redfish_username": "admin", "redfish_password": "password"}
	for k, v := range extra {
		di[k] = v
	}
	i, err := parseInfo(di)
	if err != nil {
		t.Fatal(err)
	}
	return i
}

// parseInfo reads di as the driver_info of node-1's power interface.
func parseInfo(di map[string]any) (Info, error) {
	return ParseInfo(driver.NewInfoReader("node-1", driver.KindPower, ImplRedfish, "driver_info", di))
}

func TestParseInfo(t *testing.T) {
	cases := []struct {
		name    string
		di      map[string]any
		field   string
		missing bool
	}{
		{"missing address", map[string]any{}, "redfish_address", true},
		{"bad scheme", map[string]any{"redfish_address": "ftp://bmc"}, "redfish_address", false},
		{"bad port", map[string]any{"redfish_address": "bmc:99999"}, "redfish_address", false},
		{"credentials in url", map[string]any{"redfish_address": "https://u:secretpw@bmc"}, "redfish_address", false},
		{"system id neither a path nor an id", map[string]any{"redfish_address": "bmc", "redfish_system_id": "Systems/1"}, "redfish_system_id", false},
		{"bad auth type", map[string]any{"redfish_address": "bmc", "redfish_auth_type": "kerberos"}, "redfish_auth_type", false},
		{"bad verify_ca", map[string]any{"redfish_address": "bmc", "redfish_verify_ca": "/no/such/bundle"}, "redfish_verify_ca", false},
		{"verify_ca wrong type", map[string]any{"redfish_address": "bmc", "redfish_verify_ca": 3.0}, "redfish_verify_ca", false},
		{"password without user", map[string]any{"redfish_address": "bmc", "redfish_password": "secretpw"}, "redfish_username", true},
		{"username not a string", map[string]any{"redfish_address": "bmc", "redfish_username": 7.0}, "redfish_username", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseInfo(tc.di)
			var me *driver.MissingParameterError
			var ie *driver.InvalidParameterError
			switch {
			case tc.missing:
				if !errors.As(err, &me) || len(me.Missing) != 1 || me.Missing[0] != tc.field || me.Node != "node-1" || me.Impl != ImplRedfish || me.Field != "driver_info" {
					t.Fatalf("got %v, want a *driver.MissingParameterError on %s", err, tc.field)
				}
			default:
				if !errors.As(err, &ie) || ie.Key != tc.field || ie.Node != "node-1" || ie.Impl != ImplRedfish || ie.Field != "driver_info" || ie.Expected == "" || !errors.Is(err, driver.ErrInvalidParameter) {
					t.Fatalf("got %v, want a *driver.InvalidParameterError on %s", err, tc.field)
				}
			}
			if strings.Contains(err.Error(), "secretpw") {
				t.Fatalf("error leaks the password: %v", err)
			}
		})
	}
	i, err := parseInfo(map[string]any{"redfish_address": "bmc.example:8443/prefix/", "redfish_verify_ca": "False", "redfish_auth_type": "Session", "redfish_username": "u", "redfish_password": "secretpw"})
	if err != nil {
		t.Fatal(err)
	}
	if i.Endpoint != "https://bmc.example:8443/prefix" || i.VerifyCA || i.AuthType != AuthSession {
		t.Fatalf("unexpected %+v", i)
	}
	if strings.Contains(i.String(), "secretpw") {
		t.Fatal("String leaks the password")
	}
}

func TestSessionReusedAndLoggedOut(t *testing.T) {
	s := newServer(t, redfishtest.Options{})
	p := NewPool(Options{Sleep: noSleep})
	ctx := context.Background()
	for range 5 {
		c, err := p.Conn(info(t, s, nil))
		if err != nil {
			t.Fatal(err)
		}
		sys, err := c.System(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		if ps, err := sys.PowerState(); err != nil || ps != "Off" {
			t.Fatalf("power state %q, %v", ps, err)
		}
	}
	if st := s.Stats(); st.SessionsCreated != 1 || s.ActiveSessions() != 1 {
		t.Fatalf("want one reused session, got %+v active=%d", st, s.ActiveSessions())
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if s.ActiveSessions() != 0 || s.Stats().SessionsDeleted != 1 {
		t.Fatalf("session not logged out: active=%d", s.ActiveSessions())
	}
}

func TestReloginAfter401(t *testing.T) {
	s := newServer(t, redfishtest.Options{})
	p := NewPool(Options{Sleep: noSleep})
	defer p.Close(context.Background())
	c, _ := p.Conn(info(t, s, map[string]any{"redfish_auth_type": "session"}))
	ctx := context.Background()
	sys, err := c.System(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	s.ExpireSessions()
	// Several callers hit the expired session at once; one login serves all.
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			if _, err := sys.PowerState(); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if st := s.Stats(); st.SessionsCreated > 3 || st.SessionsCreated < 2 {
		t.Fatalf("want a re-login, got %d sessions", st.SessionsCreated)
	}
}

func TestBadPasswordNeverInError(t *testing.T) {
	s := newServer(t, redfishtest.Options{})
	p := NewPool(Options{Sleep: noSleep})
	for _, auth := range []string{"session", "basic"} {
		c, _ := p.Conn(info(t, s, map[string]any{"redfish_password": "hunter2-wrong", "redfish_auth_type": auth}))
		_, err := c.System(context.Background(), "")
		if !errors.Is(err, ErrAuth) {
			t.Fatalf("%s: want ErrAuth, got %v", auth, err)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Fatalf("%s: error leaks the password: %v", auth, err)
		}
	}
}

func TestBackoffOn5xx(t *testing.T) {
	s := newServer(t, redfishtest.Options{})
	var slept []time.Duration
	var mu sync.Mutex
	p := NewPool(Options{Retries: 3, BackoffBase: 100 * time.Millisecond, Sleep: func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		slept = append(slept, d)
		mu.Unlock()
		return ctx.Err()
	}})
	c, _ := p.Conn(info(t, s, map[string]any{"redfish_auth_type": "basic"}))
	sys, err := c.System(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	s.FailNext(503, 500)
	if _, err := sys.PowerState(); err != nil {
		t.Fatalf("two 5xx then success should succeed: %v", err)
	}
	if len(slept) != 2 || slept[1] < slept[0]/2 || slept[0] > 100*time.Millisecond {
		t.Fatalf("unexpected backoff %v", slept)
	}
	s.FailNext(503, 503, 503, 503, 503)
	_, err = sys.PowerState()
	var he *HTTPError
	if !errors.Is(err, ErrUnavailable) || !errors.As(err, &he) || he.Status != 503 {
		t.Fatalf("want ErrUnavailable with 503, got %v", err)
	}
	s.FailNext(400)
	if _, err := sys.PowerState(); errors.Is(err, ErrUnavailable) || !errors.As(err, &he) || he.Status != 400 {
		t.Fatalf("4xx must not be retried: %v", err)
	}
}

func TestConcurrencyLimitAndTimeout(t *testing.T) {
	s := newServer(t, redfishtest.Options{Latency: 20 * time.Millisecond})
	p := NewPool(Options{MaxConcurrentPerBMC: 2, Sleep: noSleep})
	defer p.Close(context.Background())
	c, _ := p.Conn(info(t, s, nil))
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() {
			sys, err := c.System(context.Background(), "")
			if err == nil {
				_, err = sys.PowerState()
			}
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	// A second user on the same BMC shares its limit.
	other, _ := p.Conn(info(t, s, map[string]any{"redfish_auth_type": "basic"}))
	for _, conn := range []*Conn{c, other, c, other, c, other} {
		wg.Go(func() {
			sys, err := conn.System(context.Background(), "")
			if err == nil {
				_, err = sys.PowerState()
			}
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if peak := s.Stats().PeakConcurrent; peak > 2 {
		t.Fatalf("peak concurrent requests %d exceeds the limit 2", peak)
	}

	// The BMC answers after a minute; the call gives up after its own
	// 50 ms timeout, long before (the bound is the BMC's latency, not a
	// wall-clock figure: a loaded machine may take a while to time out).
	const latency = time.Minute
	slow := newServer(t, redfishtest.Options{Latency: latency})
	p2 := NewPool(Options{CallTimeout: 50 * time.Millisecond, Retries: -1, Sleep: noSleep})
	c2, _ := p2.Conn(info(t, slow, map[string]any{"redfish_auth_type": "basic"}))
	start := time.Now()
	_, err := c2.System(context.Background(), "")
	if took := time.Since(start); err == nil || took >= latency/2 {
		t.Fatalf("per-call timeout not applied: %v after %v", err, took)
	}
}

func TestTLSVerification(t *testing.T) {
	s := newServer(t, redfishtest.Options{TLS: true})
	ctx := context.Background()
	p := NewPool(Options{Sleep: noSleep, Retries: -1})
	c, _ := p.Conn(info(t, s, nil))
	if _, err := c.System(ctx, ""); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("self-signed certificate must be refused by default, got %v", err)
	}
	c, _ = p.Conn(info(t, s, map[string]any{"redfish_verify_ca": false}))
	if _, err := c.System(ctx, ""); err != nil {
		t.Fatalf("verify_ca=false: %v", err)
	}
	bundle := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(bundle, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := p.Conn(info(t, s, map[string]any{"redfish_verify_ca": bundle}))
	if err != nil {
		t.Fatal(err)
	}
	sys, err := c.System(ctx, "")
	if err != nil {
		t.Fatalf("verify_ca=bundle: %v", err)
	}
	if ps, err := sys.PowerState(); err != nil || ps != "Off" {
		t.Fatalf("over TLS: %q %v", ps, err)
	}
	_ = p.Close(ctx)
}

func system(t *testing.T, s *redfishtest.Server) *System {
	t.Helper()
	p := NewPool(Options{Sleep: noSleep})
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	c, err := p.Conn(info(t, s, nil))
	if err != nil {
		t.Fatal(err)
	}
	sys, err := c.System(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	return sys
}

func TestPowerBootAndMedia(t *testing.T) {
	s := newServer(t, redfishtest.Options{})
	sys := system(t, s)
	if used, err := sys.Reset("On", "ForceOn"); err != nil || used != "On" || s.PowerState() != "On" {
		t.Fatalf("reset on: %q %v power=%s", used, err, s.PowerState())
	}
	if _, err := sys.Reset("NoSuchReset"); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("unadvertised reset type: %v", err)
	}
	if err := sys.SetBoot("Cd", "Once", "UEFI"); err != nil {
		t.Fatal(err)
	}
	if b, err := sys.Boot(); err != nil || b.Target != "Cd" || b.Enabled != "Once" || b.Mode != "UEFI" {
		t.Fatalf("boot read back %+v %v", b, err)
	}
	if err := sys.SetBoot("Floppy", "Once", ""); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("unadvertised boot target: %v", err)
	}
	uri, err := sys.InsertCD("http://images.example/ramdisk.iso")
	if err != nil {
		t.Fatal(err)
	}
	if vm := s.Resource(uri); vm["Inserted"] != true || vm["Image"] != "http://images.example/ramdisk.iso" {
		t.Fatalf("media not inserted: %v", vm)
	}
	if _, err := sys.InsertCD("http://images.example/other.iso"); err != nil {
		t.Fatalf("re-insert must eject first: %v", err)
	}
	if err := sys.EjectCD(); err != nil {
		t.Fatal(err)
	}
	if vm := s.Resource(uri); vm["Inserted"] != false {
		t.Fatalf("media not ejected: %v", vm)
	}
	if err := sys.SetSecureBoot(true); err != nil {
		t.Fatal(err)
	}
	if sb, err := sys.SecureBoot(); err != nil || !sb.SecureBootEnable {
		t.Fatalf("secure boot read back: %v", err)
	}
	if err := sys.SetIndicator("Blinking"); err != nil {
		t.Fatal(err)
	}
	if v, err := sys.Indicator(); err != nil || v != "Blinking" {
		t.Fatalf("indicator %q %v", v, err)
	}
}

func TestInspectTolerant(t *testing.T) {
	s := newServer(t, redfishtest.Options{})
	sys := system(t, s)
	inv, err := sys.Inspect()
	if err != nil {
		t.Fatal(err)
	}
	if inv.MemoryMiB != 96*1024 || inv.CPUArch != "x86_64" || inv.CPUs == 0 || inv.BootMode != "uefi" || len(inv.NICs) < 2 || inv.LocalGB() == 0 {
		t.Fatalf("inventory %+v localgb=%d", inv, inv.LocalGB())
	}
	// A vendor quirk: memory size as a non-numeric string and a broken
	// processor collection. Inspection degrades those two, nothing more.
	s.Mutate("/redfish/v1/Systems/"+redfishtest.SystemID, func(m map[string]any) {
		m["MemorySummary"].(map[string]any)["TotalSystemMemoryGiB"] = "ninety-six"
	})
	s.Mutate("/redfish/v1/Systems/"+redfishtest.SystemID+"/Processors", func(m map[string]any) { m["Members"] = "oops" })
	inv2, err := sys.Inspect()
	if err != nil {
		t.Fatal(err)
	}
	if inv2.MemoryMiB != 0 || len(inv2.Warnings) == 0 || len(inv2.NICs) != len(inv.NICs) || inv2.LocalGB() != inv.LocalGB() {
		t.Fatalf("quirk not contained: %+v", inv2)
	}
}

func TestBIOSRAIDFirmware(t *testing.T) {
	s := newServer(t, redfishtest.Options{TaskPolls: 2})
	sys := system(t, s)
	reg, err := sys.BIOSRegistry()
	if err != nil || len(reg) == 0 {
		t.Fatalf("registry %v %v", reg, err)
	}
	if err := sys.ApplyBIOS(map[string]any{"ProcTurboMode": "Sideways"}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("value outside the registry: %v", err)
	}
	if err := sys.ApplyBIOS(map[string]any{"ProcTurboMode": "Disabled"}); err != nil {
		t.Fatal(err)
	}
	if _, err := sys.Reset("ForceRestart"); err != nil {
		t.Fatal(err)
	}
	if cur, err := sys.BIOSSettings(); err != nil || cur["ProcTurboMode"] != "Disabled" {
		t.Fatalf("BIOS setting not applied at reboot: %v %v", cur["ProcTurboMode"], err)
	}
	if err := sys.ResetBIOS(); err != nil {
		t.Fatal(err)
	}
	if _, err := sys.Reset("ForceRestart"); err != nil {
		t.Fatal(err)
	}
	if cur, _ := sys.BIOSSettings(); cur["ProcTurboMode"] != "Enabled" {
		t.Fatalf("factory reset not applied: %v", cur["ProcTurboMode"])
	}

	before, err := sys.Volumes()
	if err != nil {
		t.Fatal(err)
	}
	uri, err := sys.CreateVolume("root", "RAID1", 100*gib)
	if err != nil || uri == "" {
		t.Fatalf("create volume %q %v", uri, err)
	}
	after, _ := sys.Volumes()
	if len(after) != len(before)+1 {
		t.Fatalf("volumes %d -> %d", len(before), len(after))
	}
	if err := sys.DeleteVolume(uri); err != nil {
		t.Fatal(err)
	}
	if again, _ := sys.Volumes(); len(again) != len(before) {
		t.Fatalf("volume not deleted")
	}

	fw, err := sys.Firmware()
	if err != nil || len(fw) == 0 {
		t.Fatalf("firmware %v %v", fw, err)
	}
	fwImages := firmwareServer(t)
	task, err := sys.StartUpdate(fwImages+"/bios-2.0.bin", []string{"/redfish/v1/UpdateService/FirmwareInventory/BIOS"})
	if err != nil || task == "" {
		t.Fatalf("start update %q %v", task, err)
	}
	st, err := sys.WaitTask(context.Background(), task, time.Millisecond)
	if err != nil || !st.OK() || !st.ResetRequired() {
		t.Fatalf("task %+v %v: want completed, asking for a reset", st, err)
	}
	// Staged: the BIOS takes the new version at the next reset.
	biosVersion := func() string {
		fw, _ := sys.Firmware()
		for _, c := range fw {
			if c.ID == "BIOS" {
				return c.Version
			}
		}
		return ""
	}
	if v := biosVersion(); v == "bios-2.0" {
		t.Fatalf("BIOS version %q before the reset", v)
	}
	if _, err := sys.Reset("ForceRestart"); err != nil {
		t.Fatal(err)
	}
	if v := biosVersion(); v != "bios-2.0" {
		t.Fatalf("BIOS version %q after the reset", v)
	}
	// A bad image URL fails the task with the BMC's message.
	task, err = sys.StartUpdate(fwImages+"/missing.bin", []string{"/redfish/v1/UpdateService/FirmwareInventory/BMC"})
	if err != nil {
		t.Fatal(err)
	}
	if st, err = sys.WaitTask(context.Background(), task, time.Millisecond); err != nil || st.State != "Exception" || !strings.Contains(strings.Join(st.Messages, " "), "missing.bin") {
		t.Fatalf("bad image: %+v %v", st, err)
	}
	// A target that is not in the inventory is refused outright.
	if _, err := sys.StartUpdate(fwImages+"/x.bin", []string{"/redfish/v1/Systems"}); err == nil {
		t.Fatal("a target outside the inventory was accepted")
	}
}

// firmwareServer serves firmware images on loopback (any name ending in
// .bin but missing.bin), as an operator's image server.
func firmwareServer(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, ".bin") || strings.HasSuffix(r.URL.Path, "/missing.bin") {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte("firmware image " + r.URL.Path))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestAutoFallsBackToBasic(t *testing.T) {
	s := newServer(t, redfishtest.Options{NoSessions: true})
	p := NewPool(Options{Sleep: noSleep})
	c, _ := p.Conn(info(t, s, map[string]any{"redfish_auth_type": "auto"}))
	sys, err := c.System(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if ps, err := sys.PowerState(); err != nil || ps != "Off" {
		t.Fatalf("%q %v", ps, err)
	}
	if s.Stats().SessionsCreated != 0 || s.Stats().Unauthorized != 0 {
		t.Fatalf("unexpected %+v", s.Stats())
	}
	c2, _ := p.Conn(info(t, s, map[string]any{"redfish_auth_type": "session"}))
	if _, err := c2.System(context.Background(), ""); err == nil {
		t.Fatal("auth_type session must not fall back to basic")
	}
}

func TestPoolEvictsLeastRecentlyUsedWithLogout(t *testing.T) {
	a := newServer(t, redfishtest.Options{})
	b := newServer(t, redfishtest.Options{})
	p := NewPool(Options{MaxConnections: 1, Sleep: noSleep})
	ctx := context.Background()
	for _, s := range []*redfishtest.Server{a, b} {
		c, err := p.Conn(info(t, s, nil))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.System(ctx, ""); err != nil {
			t.Fatal(err)
		}
	}
	if a.ActiveSessions() != 0 || b.ActiveSessions() != 1 {
		t.Fatalf("evicted BMC keeps %d sessions, current has %d", a.ActiveSessions(), b.ActiveSessions())
	}
	if err := p.Close(ctx); err != nil || b.ActiveSessions() != 0 {
		t.Fatalf("close: %v, %d left", err, b.ActiveSessions())
	}
}

func TestEchoedPasswordIsMasked(t *testing.T) {
	s := newServer(t, redfishtest.Options{})
	p := NewPool(Options{Sleep: noSleep})
	defer p.Close(context.Background())
	c, _ := p.Conn(info(t, s, map[string]any{"redfish_password": "Sekr1t-pw"}))
	// A careless BMC quotes the credentials in its error message.
	he := c.httpError("POST", "/redfish/v1/SessionService/Sessions", &http.Response{StatusCode: 500,
		Body: io.NopCloser(strings.NewReader(`{"error":{"code":"Base.1.5.0.InternalError","message":"login admin/Sekr1t-pw failed"}}`))})
	if strings.Contains(he.Error(), "Sekr1t") || !strings.Contains(he.Error(), "admin/******") || he.MessageID != "Base.1.5.0.InternalError" {
		t.Fatalf("echoed password not masked: %v", he)
	}
}
