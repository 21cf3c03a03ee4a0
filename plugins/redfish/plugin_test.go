package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/plugin"
	"github.com/anvilmetal/anvil/driver/plugin/plugintest"
	"github.com/anvilmetal/anvil/plugins/redfish/redfishtest"
	"github.com/anvilmetal/anvil/plugins/redfish/rfdriver"
)

// thePlugin is this package's plugin executable, built once for the test
// binary.
var thePlugin = &plugintest.Plugin{Package: ".", Name: "redfish"}

func TestMain(m *testing.M) { plugintest.Main(m, thePlugin) }

// load starts the plugin through a host and returns its implementations.
func load(t testing.TB, logs *plugintest.LogBuffer) (*plugin.Host, map[driver.Kind]driver.Implementation) {
	t.Helper()
	var sink io.Writer
	if logs != nil {
		sink = logs
	}
	host, _ := plugintest.Load(t, thePlugin.Path(t), plugintest.Options{Logs: sink})
	b, err := host.Plugins()[0].Bundle()
	if err != nil {
		t.Fatal(err)
	}
	if len(b.HardwareTypes) != 1 || b.HardwareTypes[0].Name != rfdriver.HardwareType {
		t.Fatalf("hardware types %+v", b.HardwareTypes)
	}
	impls := map[driver.Kind]driver.Implementation{}
	for _, i := range b.Implementations {
		impls[i.Kind] = i
	}
	return host, impls
}

func newTask(s *redfishtest.Server, password string) *driver.Task {
	return &driver.Task{NodeUUID: "node-rf", HardwareType: rfdriver.HardwareType, DriverInfo: map[string]any{
		"redfish_address": s.URL(), "redfish_username": "admin", "redfish_password": password,
		"redfish_verify_ca": false, "redfish_deploy_iso": "http://images.example/ipa.iso",
	}}
}

func newServer(t testing.TB, opts redfishtest.Options) *redfishtest.Server {
	t.Helper()
	s, err := redfishtest.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// TestConformanceThroughPlugin runs the driver conformance suite on every
// implementation as the host sees it: proxies to the plugin process,
// which talks HTTPS to the mockup BMC.
func TestConformanceThroughPlugin(t *testing.T) {
	s := newServer(t, redfishtest.Options{TLS: true})
	slow := newServer(t, redfishtest.Options{TLS: true, Latency: 3 * time.Second})
	host, impls := load(t, nil)
	want := map[driver.Kind]string{
		driver.KindPower: "redfish", driver.KindManagement: "redfish", driver.KindBoot: "redfish-virtual-media",
		driver.KindInspect: "redfish", driver.KindBIOS: "redfish", driver.KindRAID: "redfish",
		driver.KindFirmware: "redfish", driver.KindVendor: "redfish",
	}
	for k, name := range want {
		if impls[k].Name != name {
			t.Fatalf("%s implementation %q, want %q", k, impls[k].Name, name)
		}
	}
	plugintest.Conformance(t, host, plugintest.Suite{
		NewTask: func() *driver.Task { return newTask(s, "password") },
		Slow: func(k driver.Kind, _ string) func(*driver.Task) {
			switch k {
			case driver.KindPower, driver.KindManagement, driver.KindBIOS, driver.KindFirmware:
				return func(tk *driver.Task) { tk.DriverInfo["redfish_address"] = slow.URL() }
			}
			return nil
		},
	})
}

// TestSessionReuseLogoutAndSecrets checks, across the process boundary,
// that calls share one session, that stopping the plugin logs it out, and
// that a wrong password appears neither in errors nor in any log line.
func TestSessionReuseLogoutAndSecrets(t *testing.T) {
	s := newServer(t, redfishtest.Options{})
	logs := &plugintest.LogBuffer{}
	host, impls := load(t, logs)
	ctx := context.Background()
	p := impls[driver.KindPower].Impl.(driver.PowerInterface)
	tk := newTask(s, "password")
	if err := p.SetPowerState(ctx, tk, driver.PowerOn, 0); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if st, err := p.GetPowerState(ctx, tk); err != nil || st != driver.PowerOn {
			t.Fatalf("%q %v", st, err)
		}
	}
	if st := s.Stats(); st.SessionsCreated != 1 || s.ActiveSessions() != 1 {
		t.Fatalf("want one reused session, got %d created, %d active", st.SessionsCreated, s.ActiveSessions())
	}
	const secret = "Zq9-wrong-Pw"
	_, err := p.GetPowerState(ctx, newTask(s, secret))
	if err == nil || strings.Contains(err.Error(), secret) {
		t.Fatalf("wrong password: %v", err)
	}
	host.Close()
	deadline := time.Now().Add(5 * time.Second)
	for s.ActiveSessions() != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := s.ActiveSessions(); n != 0 {
		t.Fatalf("%d sessions left open after the plugin stopped", n)
	}
	if strings.Contains(logs.String(), secret) || strings.Contains(logs.String(), `"password"`) {
		t.Fatalf("a password reached the logs:\n%s", logs.String())
	}
}

// BenchmarkPowerStateThroughPlugin measures one power-state read from the
// host, through the plugin process, to the mockup BMC.
func BenchmarkPowerStateThroughPlugin(b *testing.B) {
	s := newServer(b, redfishtest.Options{})
	_, impls := load(b, nil)
	p := impls[driver.KindPower].Impl.(driver.PowerInterface)
	tk := newTask(s, "password")
	ctx := context.Background()
	for b.Loop() {
		if _, err := p.GetPowerState(ctx, tk); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPowerSync100BMCsThroughPlugin is one power-sync cycle from the
// host through the plugin process: 100 simulated BMCs answering after
// 2 ms, 4 nodes each, all 400 reads started at once. It reports the
// cycle time and the highest number of requests any single BMC had in
// flight (the plugin's per-BMC limit is 2).
func BenchmarkPowerSync100BMCsThroughPlugin(b *testing.B) {
	const bmcs, nodesPerBMC = 100, 4
	servers := make([]*redfishtest.Server, bmcs)
	for i := range servers {
		servers[i] = newServer(b, redfishtest.Options{Latency: 2 * time.Millisecond})
	}
	_, impls := load(b, nil)
	p := impls[driver.KindPower].Impl.(driver.PowerInterface)
	var tasks []*driver.Task
	for _, s := range servers {
		for n := range nodesPerBMC {
			tk := newTask(s, "password")
			tk.NodeUUID = fmt.Sprintf("%s-%d", s.URL(), n)
			tasks = append(tasks, tk)
		}
	}
	ctx := context.Background()
	cycle := func() {
		var wg sync.WaitGroup
		for _, tk := range tasks {
			wg.Go(func() {
				if _, err := p.GetPowerState(ctx, tk); err != nil {
					b.Error(err)
				}
			})
		}
		wg.Wait()
	}
	cycle() // first contact: one login per BMC
	b.ResetTimer()
	for b.Loop() {
		cycle()
	}
	b.StopTimer()
	peak, sessions := 0, 0
	for _, s := range servers {
		st := s.Stats()
		peak = max(peak, st.PeakConcurrent)
		sessions += st.SessionsCreated
	}
	b.ReportMetric(float64(peak), "peak-req/bmc")
	b.ReportMetric(float64(sessions)/bmcs, "sessions/bmc")
}

// TestManagementCapabilitiesThroughPlugin reaches the NMI, indicator and
// secure boot capabilities through the plugin process against the mockup
// BMC, including a service that only has LocationIndicatorActive and one
// that does not offer the Nmi reset type.
func TestManagementCapabilitiesThroughPlugin(t *testing.T) {
	s := newServer(t, redfishtest.Options{})
	_, impls := load(t, nil)
	m := impls[driver.KindManagement].Impl
	ctx := context.Background()
	tk := newTask(s, "password")
	sysURI := "/redfish/v1/Systems/" + redfishtest.SystemID
	if _, ok := driver.As[driver.SensorReader](m); ok {
		t.Error("redfish management offers SensorReader, which it does not implement")
	}
	if err := driver.Available(m); err != nil {
		t.Errorf("available: %v", err)
	}

	nmi, ok := driver.As[driver.NMIInjector](m)
	if !ok {
		t.Fatal("no NMIInjector through the plugin")
	}
	if err := nmi.InjectNMI(ctx, tk); err != nil {
		t.Fatal(err)
	}
	if r := s.Stats().Resets; len(r) == 0 || r[len(r)-1] != "Nmi" {
		t.Fatalf("resets seen by the BMC: %v", r)
	}

	ind, ok := driver.As[driver.IndicatorManager](m)
	if !ok {
		t.Fatal("no IndicatorManager through the plugin")
	}
	if st, err := ind.GetIndicatorState(ctx, tk); err != nil || st != driver.IndicatorOff {
		t.Fatalf("indicator %q, %v; want off", st, err)
	}
	if err := ind.SetIndicatorState(ctx, tk, driver.IndicatorBlinking); err != nil {
		t.Fatal(err)
	}
	if st, err := ind.GetIndicatorState(ctx, tk); err != nil || st != driver.IndicatorBlinking || s.Resource(sysURI)["IndicatorLED"] != "Blinking" {
		t.Fatalf("indicator %q, %v (BMC %v); want blinking", st, err, s.Resource(sysURI)["IndicatorLED"])
	}
	var inval *driver.InvalidParameterError
	if err := ind.SetIndicatorState(ctx, tk, "purple"); !errors.As(err, &inval) || inval.Key != "state" {
		t.Fatalf("bad state: %v", err)
	}
	// A newer service: LocationIndicatorActive only.
	s.Mutate(sysURI, func(r map[string]any) {
		delete(r, "IndicatorLED")
		r["LocationIndicatorActive"] = false
	})
	if err := ind.SetIndicatorState(ctx, tk, driver.IndicatorOn); err != nil {
		t.Fatal(err)
	}
	if st, err := ind.GetIndicatorState(ctx, tk); err != nil || st != driver.IndicatorOn || s.Resource(sysURI)["LocationIndicatorActive"] != true {
		t.Fatalf("location indicator %q, %v (BMC %v); want on", st, err, s.Resource(sysURI)["LocationIndicatorActive"])
	}
	var unsup *driver.UnsupportedError
	if err := ind.SetIndicatorState(ctx, tk, driver.IndicatorBlinking); !errors.As(err, &unsup) || unsup.Operation != "set_indicator_state" {
		t.Fatalf("blinking a location indicator: %v", err)
	}

	sb, ok := driver.As[driver.SecureBootManager](m)
	if !ok {
		t.Fatal("no SecureBootManager through the plugin")
	}
	for _, want := range []bool{true, false} {
		if err := sb.SetSecureBootState(ctx, tk, want); err != nil {
			t.Fatal(err)
		}
		if on, err := sb.GetSecureBootState(ctx, tk); err != nil || on != want || s.Resource(sysURI + "/SecureBoot")["SecureBootEnable"] != want {
			t.Fatalf("secure boot %v, %v; want %v", on, err, want)
		}
	}

	// A system that does not advertise Nmi: a typed unsupported error.
	s.Mutate(sysURI, func(r map[string]any) {
		act := r["Actions"].(map[string]any)["#ComputerSystem.Reset"].(map[string]any)
		act["ResetType@Redfish.AllowableValues"] = []any{"On", "ForceOff"}
	})
	if err := nmi.InjectNMI(ctx, tk); !errors.As(err, &unsup) || unsup.Operation != "inject_nmi" {
		t.Fatalf("nmi not advertised: %v", err)
	}
}

// TestParameterErrorsThroughPlugin checks that the driver_info errors of
// driver.InfoReader cross the plugin process with their fields: every
// missing key with its hint, and the invalid key with what was expected.
func TestParameterErrorsThroughPlugin(t *testing.T) {
	_, impls := load(t, nil)
	p := impls[driver.KindPower].Impl
	ctx := context.Background()
	var miss *driver.MissingParameterError
	err := p.Validate(ctx, &driver.Task{NodeUUID: "n1", DriverInfo: map[string]any{"redfish_password": "s3cr3t"}})
	if !errors.As(err, &miss) || miss.Node != "n1" || miss.Kind != driver.KindPower || miss.Impl != rfdriver.ImplRedfish ||
		strings.Join(miss.Missing, ",") != "redfish_address,redfish_username" || miss.Hints["redfish_username"] == "" || strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("Validate = %#v, want both keys missing, with the username's hint", err)
	}
	var inval *driver.InvalidParameterError
	err = p.Validate(ctx, &driver.Task{NodeUUID: "n1", DriverInfo: map[string]any{"redfish_address": "bmc", "redfish_auth_type": "kerberos"}})
	if !errors.As(err, &inval) || inval.Node != "n1" || inval.Key != "redfish_auth_type" || !strings.Contains(inval.Expected, `"session"`) {
		t.Fatalf("Validate = %#v, want redfish_auth_type invalid", err)
	}
}
