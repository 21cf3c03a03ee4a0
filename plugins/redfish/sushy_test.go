package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/driver/plugin/plugintest"
	"github.com/anvilmetal/anvil/internal/plugine2e"
	"github.com/anvilmetal/anvil/plugins/redfish/redfishtest"
	"github.com/anvilmetal/anvil/plugins/redfish/rfdriver"
	"github.com/anvilmetal/anvil/statemachine"
)

// sushyUUIDs are the fake systems the emulator serves behind one address.
var sushyUUIDs = []string{
	"5a1e0000-0000-4000-8000-000000000001",
	"5a1e0000-0000-4000-8000-000000000002",
	"5a1e0000-0000-4000-8000-000000000003",
}

// sushy is a running sushy-tools emulator (fake driver, HTTP Basic only).
type sushy struct {
	url string
	hc  *http.Client
}

// startSushy starts sushy-tools from the unpacked source named by
// ANVIL_TEST_SUSHY_TOOLS on a free loopback port, with three fake systems
// and HTTP Basic authentication (admin/password); it is stopped by PID
// when the test ends.
func startSushy(t *testing.T) *sushy {
	t.Helper()
	src := os.Getenv("ANVIL_TEST_SUSHY_TOOLS")
	if src == "" {
		t.Skip("ANVIL_TEST_SUSHY_TOOLS (unpacked sushy-tools source) is not set")
	}
	python := os.Getenv("ANVIL_TEST_PYTHON")
	if python == "" {
		python = "/usr/bin/python3"
		if _, err := os.Stat(python); err != nil {
			python = "python3"
		}
	}
	dir := t.TempDir()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	htpasswd := filepath.Join(dir, "htpasswd")
	gen := exec.Command(python, "-c", "import bcrypt,sys; open(sys.argv[1],'w').write('admin:'+bcrypt.hashpw(b'password', bcrypt.gensalt(rounds=4)).decode()+'\\n')", htpasswd)
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("htpasswd: %v: %s", err, out)
	}
	var systems []string
	for i, u := range sushyUUIDs {
		systems = append(systems, fmt.Sprintf("{'uuid': '%s', 'name': 'anvil-%d', 'power_state': 'Off', 'nics': [{'mac': '52:54:00:5a:1e:0%d', 'ip': '127.0.0.1'}]}", u, i, i))
	}
	conf := filepath.Join(dir, "emulator.conf")
	cfg := fmt.Sprintf("SUSHY_EMULATOR_LISTEN_IP = '127.0.0.1'\nSUSHY_EMULATOR_LISTEN_PORT = %d\nSUSHY_EMULATOR_NO_MEMOIZE = True\n"+
		"SUSHY_EMULATOR_AUTH_FILE = '%s'\nSUSHY_EMULATOR_FAKE_SYSTEMS = [%s]\n", port, htpasswd, strings.Join(systems, ", "))
	if err := os.WriteFile(conf, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &plugintest.LogBuffer{}
	cmd := exec.Command(python, "-m", "sushy_tools.emulator.main", "--fake", "--config", conf)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, logs, logs
	cmd.Env = append(os.Environ(), "PYTHONPATH="+src)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		if p, err := os.FindProcess(pid); err == nil {
			_ = p.Kill()
		}
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("sushy-tools output:\n%s", logs.String())
		}
	})
	s := &sushy{url: fmt.Sprintf("http://127.0.0.1:%d", port), hc: &http.Client{Timeout: 5 * time.Second}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := s.hc.Get(s.url + "/redfish/v1/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("sushy-tools did not answer at %s: %v\n%s", s.url, err, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// system reads a system's resource directly (HTTP Basic).
func (s *sushy) system(t *testing.T, uuid string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.url+"/redfish/v1/Systems/"+uuid, nil)
	req.SetBasicAuth("admin", "password")
	resp, err := s.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return m
}

func (s *sushy) power(t *testing.T, uuid string) string {
	p, _ := s.system(t, uuid)["PowerState"].(string)
	return p
}

func (s *sushy) bootTarget(t *testing.T, uuid string) string {
	b, _ := s.system(t, uuid)["Boot"].(map[string]any)
	v, _ := b["BootSourceOverrideTarget"].(string)
	return v
}

// TestSushyToolsSeveralSystems runs against the real sushy-tools
// emulator (fake driver, several systems behind one address, HTTP Basic
// only, no session service): one node per system is enrolled and managed
// through the plugin process with redfish_auth_type auto (item 2: auto
// must fall back to Basic), each records its own system's UUID, and power
// and boot-device actions reach only the node's own system (item 1).
// sushy's fake Reset changes the power state 1-11 s later, so states are
// polled with a bounded deadline.
func TestSushyToolsSeveralSystems(t *testing.T) {
	s := startSushy(t)
	ctx := context.Background()
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{rfdriver.HardwareType}})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		t.Fatal(err)
	}
	cond := plugine2e.StartConductor(t, reg, thePlugin.Path(t), "sushy")
	info := func(i int) map[string]any {
		di := map[string]any{
			"redfish_address": s.url, "redfish_username": "admin", "redfish_password": "password",
			"redfish_auth_type": "auto", "redfish_deploy_iso": "http://127.0.0.1:1/ipa.iso",
		}
		// By Id for the first, by path for the others.
		di["redfish_system_id"] = "/redfish/v1/Systems/" + sushyUUIDs[i]
		if i == 0 {
			di["redfish_system_id"] = sushyUUIDs[i]
		}
		return di
	}
	nodes := make([]string, len(sushyUUIDs))
	for i := range sushyUUIDs {
		n, err := cond.Enroll(ctx, &baremetal.Node{Name: fmt.Sprintf("sushy-%d", i), Driver: rfdriver.HardwareType, DriverInfo: info(i)})
		if err != nil {
			t.Fatal(err)
		}
		nodes[i] = n.UUID
		if err := cond.Manage(ctx, n.UUID); err != nil {
			t.Fatal(err)
		}
	}
	for i, uuid := range nodes {
		m := cond.WaitState(t, uuid, statemachine.Manageable)
		if got := m.DriverInternalInfo[driver.IdentityKey]; got != "redfish-uuid:"+sushyUUIDs[i] {
			t.Fatalf("node %d recorded machine %v, want its own system %s", i, got, sushyUUIDs[i])
		}
	}

	// Power on nodes 0 and 2; system 1 must stay off.
	for _, i := range []int{0, 2} {
		if err := cond.SetPowerState(ctx, nodes[i], statemachine.PowerOn, 0); err != nil {
			t.Fatal(err)
		}
	}
	for _, i := range []int{0, 2} {
		m := waitPowerDone(t, cond, nodes[i])
		if m.PowerState != driver.PowerOn || s.power(t, sushyUUIDs[i]) != "On" {
			t.Fatalf("node %d: power %q (sushy %s), last error %q", i, m.PowerState, s.power(t, sushyUUIDs[i]), m.LastError)
		}
	}
	if p := s.power(t, sushyUUIDs[1]); p != "Off" {
		t.Fatalf("system 1 is %s: another node's power on reached it", p)
	}
	// Power node 2 off; system 0 stays on.
	if err := cond.SetPowerState(ctx, nodes[2], statemachine.PowerOff, 0); err != nil {
		t.Fatal(err)
	}
	if m := waitPowerDone(t, cond, nodes[2]); m.PowerState != driver.PowerOff {
		t.Fatalf("node 2: power %q, last error %q", m.PowerState, m.LastError)
	}
	if p0, p1, p2 := s.power(t, sushyUUIDs[0]), s.power(t, sushyUUIDs[1]), s.power(t, sushyUUIDs[2]); p0 != "On" || p1 != "Off" || p2 != "Off" {
		t.Fatalf("after node 2's power off: systems %s %s %s, want On Off Off", p0, p1, p2)
	}

	// Boot devices, in process: each node's target reaches its system only.
	d := rfdriver.NewDrivers(rfdriver.Options{})
	t.Cleanup(func() { _ = d.Close(context.Background()) })
	want := []struct {
		dev    driver.BootDevice
		target string
	}{{driver.BootPXE, "Pxe"}, {driver.BootCDROM, "Cd"}, {driver.BootCDROM, "Cd"}}
	for i := range nodes {
		tk := &driver.Task{NodeUUID: nodes[i], HardwareType: rfdriver.HardwareType, DriverInfo: info(i)}
		before := make([]string, len(sushyUUIDs))
		for j, u := range sushyUUIDs {
			before[j] = s.bootTarget(t, u)
		}
		if err := d.Management().SetBootDevice(ctx, tk, want[i].dev, true); err != nil {
			t.Fatalf("node %d boot device: %v", i, err)
		}
		for j, u := range sushyUUIDs {
			got := s.bootTarget(t, u)
			if j == i && got != want[i].target {
				t.Fatalf("node %d: its system's boot target is %q, want %q", i, got, want[i].target)
			}
			if j != i && got != before[j] {
				t.Fatalf("node %d's boot device changed system %d: %q -> %q", i, j, before[j], got)
			}
		}
	}

	// Virtual media (item 4): sushy downloads what it is given, so the
	// deploy ISO, the node's re-mastered boot ISO and (with
	// config_via_removable) the parameters image are served from a
	// loopback directory; the image lands in system 1's Floppy device, the
	// node's ISO in its Cd, and the interface sets the boot from CD itself.
	mediaDir := t.TempDir()
	web := httptest.NewServer(http.FileServer(http.Dir(mediaDir)))
	t.Cleanup(web.Close)
	if err := redfishtest.WriteBootISO(filepath.Join(mediaDir, "ipa.iso")); err != nil {
		t.Fatal(err)
	}
	vd := rfdriver.NewDrivers(rfdriver.Options{Media: rfdriver.DirMediaStore{Dir: mediaDir, BaseURL: web.URL}})
	t.Cleanup(func() { _ = vd.Close(context.Background()) })
	vinfo := info(1)
	vinfo["redfish_deploy_iso"] = web.URL + "/ipa.iso"
	vinfo["config_via_removable"] = true
	vtk := &driver.Task{NodeUUID: nodes[1], HardwareType: rfdriver.HardwareType, DriverInfo: vinfo}
	if err := vd.Management().SetBootDevice(ctx, vtk, driver.BootPXE, true); err != nil || s.bootTarget(t, sushyUUIDs[1]) != "Pxe" {
		t.Fatalf("boot device before PrepareRamdisk: %v", err)
	}
	if err := vd.VirtualMediaBoot().PrepareRamdisk(ctx, vtk, map[string]any{"ipa-api-url": "http://127.0.0.1:6385"}); err != nil {
		t.Fatalf("prepare ramdisk on sushy-tools: %v", err)
	}
	vm := func(dev string) map[string]any {
		req, _ := http.NewRequest(http.MethodGet, s.url+"/redfish/v1/Systems/"+sushyUUIDs[1]+"/VirtualMedia/"+dev, nil)
		req.SetBasicAuth("admin", "password")
		resp, err := s.hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&m)
		return m
	}
	if f := vm("Floppy"); f["Inserted"] != true || !strings.Contains(fmt.Sprint(f["Image"]), "ir-vfd-dev") {
		t.Fatalf("sushy-tools Floppy: %v", f)
	}
	if c := vm("Cd"); c["Inserted"] != true || c["Image"] != web.URL+"/"+nodes[1]+"-boot.iso" {
		t.Fatalf("sushy-tools Cd: %v", c)
	}
	if got := s.bootTarget(t, sushyUUIDs[1]); got != "Cd" {
		t.Fatalf("boot target after PrepareRamdisk: %q, want Cd", got)
	}
	if err := vd.VirtualMediaBoot().CleanUpRamdisk(ctx, vtk); err != nil {
		t.Fatalf("clean up ramdisk on sushy-tools: %v", err)
	}
	if f := vm("Floppy"); f["Inserted"] == true {
		t.Fatalf("sushy-tools Floppy still inserted: %v", f)
	}

	// Item 2's other half: with a wrong password auto reports bad
	// credentials (Basic got 401 too), as a typed error.
	bad := info(1)
	bad["redfish_password"] = "wrong"
	_, err := d.Power().GetPowerState(ctx, &driver.Task{NodeUUID: "bad", HardwareType: rfdriver.HardwareType, DriverInfo: bad})
	var ae *driver.BMCAuthError
	if !errors.As(err, &ae) || ae.Address != s.url {
		t.Fatalf("wrong password against sushy-tools: want BMCAuthError, got %v", err)
	}
}
