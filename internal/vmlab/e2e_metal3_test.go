package vmlab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/plugins/redfish/rfdriver"
)

// metal3Version is the microversion BMO negotiates against a maximum of
// 1.110 (see baremetal/ironicapi/bmo_replay_test.go).
const metal3Version = "1.110"

// metal3Client talks to Ironic's REST API as BMO's gophercloud client
// does: JSON, noauth, every request at metal3Version.
type metal3Client struct {
	t    *testing.T
	lab  *e2eLab
	base string
	c    *http.Client
}

// do sends a request and decodes the JSON answer (nil for an empty
// one); every answer must be at metal3Version.
func (m *metal3Client) do(method, path string, body any) (int, map[string]any) {
	m.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			m.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, m.base+path, rd)
	if err != nil {
		m.t.Fatal(err)
	}
	req.Header.Set("X-OpenStack-Ironic-API-Version", metal3Version)
	req.Header.Set("Content-Type", "application/json")
	resp, err := m.c.Do(req)
	if err != nil {
		m.lab.fail(m.t, "%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		m.t.Fatal(err)
	}
	if v := resp.Header.Get("X-OpenStack-Ironic-API-Version"); path != "/" && v != metal3Version {
		m.lab.fail(m.t, "%s %s answered at microversion %q, want %s", method, path, v, metal3Version)
	}
	var out map[string]any
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			m.lab.fail(m.t, "%s %s: %d %q is not a JSON object", method, path, resp.StatusCode, truncate(string(raw), 500))
		}
	}
	return resp.StatusCode, out
}

// must sends a request that must be answered with want.
func (m *metal3Client) must(want int, method, path string, body any) map[string]any {
	m.t.Helper()
	code, out := m.do(method, path, body)
	if code != want {
		m.lab.fail(m.t, "%s %s: %d %v, want %d", method, path, code, out, want)
	}
	return out
}

// provision asks for a provision state change, as BMO does.
func (m *metal3Client) provision(node string, body map[string]any) {
	m.t.Helper()
	m.must(http.StatusAccepted, http.MethodPut, "/v1/nodes/"+node+"/states/provision", body)
}

// waitProvision polls the node (BMO polls every 10 s; here every 2 s)
// until it is in want with no target, failing on a failed state.
func (m *metal3Client) waitProvision(node, want string, timeout time.Duration) map[string]any {
	m.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		nd := m.must(http.StatusOK, http.MethodGet, "/v1/nodes/"+node, nil)
		st, _ := nd["provision_state"].(string)
		if st == want && nd["target_provision_state"] == nil && nd["reservation"] == nil {
			return nd
		}
		if strings.HasSuffix(st, " failed") && st != want {
			m.lab.fail(m.t, "node %s in %q (last_error %v) while waiting for %q", node, st, nd["last_error"], want)
		}
		if time.Now().After(deadline) {
			m.lab.fail(m.t, "node %s still in %q (target %v) after %s, want %q", node, st, nd["target_provision_state"], timeout, want)
		}
		time.Sleep(2 * time.Second)
	}
}

// waitField polls the node until field has want.
func (m *metal3Client) waitField(node, field, want string, timeout time.Duration) time.Duration {
	m.t.Helper()
	start := time.Now()
	for {
		nd := m.must(http.StatusOK, http.MethodGet, "/v1/nodes/"+node, nil)
		if fmt.Sprint(nd[field]) == want && (field != "power_state" || nd["target_power_state"] == nil) {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			m.lab.fail(m.t, "node %s: %s is %v after %s, want %s", node, field, nd[field], timeout, want)
		}
		time.Sleep(time.Second)
	}
}

// metal3PowerSync is the conductor's power (and health) sync period in
// the Metal3 test, short so that a BMC's health change shows quickly.
const metal3PowerSync = 5 * time.Second

// TestVMMetal3Redfish is the BMO-shaped end-to-end test (issue 29): one
// QEMU machine behind the lab's Redfish BMC, driven only through Ironic's
// REST API (baremetal/ironicapi over the lab's conductor) at the
// microversion BMO negotiates, with the fields BMO sends and reads (see
// baremetal/ironicapi/bmo_replay_test.go), the stock IPA ramdisk and the
// redfish plugin executable. Its deploy ramdisk boots from virtual media:
// driver_info carries deploy_kernel and deploy_ramdisk URLs and no deploy
// ISO, so the plugin builds the boot ISO from them (rfdriver.BuildBootISO)
// with the node's parameters baked in. Phases: register (GET /v1/, the
// drivers, POST the node with inspect_interface agent and its port,
// manage); inspect in band (the inventory at GET .../inventory, every
// NIC with its pxe flag in plugin_data.all_interfaces); inspect out of
// band (inspect_interface redfish: the inventory exists afterwards and
// comes from the BMC); provide; deploy (instance_info as BMO patches it,
// validate, a config drive; the OS prints its marker); power off and on;
// health (the BMC reports a failed fan: the node's health turns Critical,
// and OK again once repaired); deprovision (cleaning erases the disk); a
// live ISO through the ramdisk deploy interface (instance_info boot_iso,
// automated_clean false; its kernel prints the ISO's command line); and
// delete. It logs every phase's wall time.
func TestVMMetal3Redfish(t *testing.T) {
	if os.Getenv(EnvVME2E) != "1" {
		t.Skip(EnvVME2E + "=1 not set: VM end-to-end provisioning test skipped")
	}
	tarball := os.Getenv(IPATarballEnv)
	if tarball == "" {
		t.Skip(IPATarballEnv + " not set: VM end-to-end provisioning test skipped")
	}
	if _, err := exec.LookPath(QEMUBinary); err != nil {
		t.Skip(QEMUBinary + " not installed (Debian package qemu-system-x86): VM end-to-end provisioning test skipped")
	}
	if l := rfdriver.DefaultBootLoaders(); !l.BIOS() {
		t.Skip("no ISOLINUX (Debian packages isolinux, syslinux-common): the virtual-media boot ISO cannot be built")
	}
	// What IRONIC_KERNEL_PARAMS gives Metal3's Ironic: the serial
	// console the lab reads, and the ramdisk's root for 1 GiB.
	t.Setenv("ANVIL_REDFISH_KERNEL_APPEND_PARAMS", "console=ttyS0,115200 rootfstype=ramfs ipa-debug=1")
	n := NewTestNetworkWith(t, NetworkOptions{RouterAdvertisements: true})
	bmc := redfishBMC()
	bmc.options = func(o *LabOptions) {
		o.SyncPowerStateInterval = metal3PowerSync
		o.MoreInterfaces = map[driver.Kind][]string{driver.KindDeploy: {"ramdisk"}, driver.KindInspect: {rfdriver.ImplRedfish}}
	}
	lab := startE2ELab(t, n, tarball, bmc)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The deploy kernel and ramdisk, and the live ISO, over HTTP as
	// Metal3's httpd serves them (DEPLOY_KERNEL_URL, DEPLOY_RAMDISK_URL).
	images := t.TempDir()
	rd := lab.Ramdisk()
	liveArgs := "console=ttyS0,115200 anvil-live-iso=metal3"
	if err := writeLiveISO(ctx, filepath.Join(images, "live.iso"), rd.Kernel.Path, liveArgs); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/html/ironic-python-agent.kernel", func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, rd.Kernel.Path) })
	mux.HandleFunc("/html/ironic-python-agent.initramfs", func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, rd.Initramfs) })
	mux.HandleFunc("/html/live.iso", func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, filepath.Join(images, "live.iso")) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	httpd := &http.Server{Handler: recordRequests(lab.tl, "httpd", mux), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = httpd.Serve(ln) }()
	defer httpd.Close()
	httpURL := "http://" + ln.Addr().String()

	apiURL, err := lab.ServeIronicAPI()
	if err != nil {
		t.Fatal(err)
	}
	api := &metal3Client{t: t, lab: lab, base: apiURL, c: &http.Client{Timeout: 30 * time.Second}}

	ph := lab.phases(t)
	phase := ph.end
	defer func() {
		la, _ := os.ReadFile("/proc/loadavg")
		ph.log("; load average at the end " + strings.Join(strings.Fields(string(la))[:3], " "))
	}()

	// 1. Register, as BMO's registration pass does.
	start := time.Now()
	_, root := api.do(http.MethodGet, "/", nil)
	if vs, _ := root["versions"].([]any); len(vs) != 1 {
		lab.fail(t, "GET /: versions %v, BMO wants exactly one", root["versions"])
	}
	v1 := api.must(http.StatusOK, http.MethodGet, "/v1/", nil)
	if ver, _ := v1["version"].(map[string]any); fmt.Sprint(ver["version"]) < metal3Version {
		lab.fail(t, "GET /v1/: maximum %v, BMO needs 1.89 and negotiates %s", ver["version"], metal3Version)
	}
	if drv := api.must(http.StatusOK, http.MethodGet, "/v1/drivers?detail=false", nil); len(drv["drivers"].([]any)) == 0 {
		lab.fail(t, "GET /v1/drivers: none (BMO's conductor-health check)")
	}
	info := lab.BMCInfo()
	delete(info, "redfish_deploy_iso")
	info["deploy_kernel"] = httpURL + "/html/ironic-python-agent.kernel"
	info["deploy_ramdisk"] = httpURL + "/html/ironic-python-agent.initramfs"
	if code, _ := api.do(http.MethodGet, "/v1/nodes/metal3~vm-redfish", nil); code != http.StatusNotFound {
		lab.fail(t, "GET the node by name before it exists: %d, want 404", code)
	}
	nd := api.must(http.StatusCreated, http.MethodPost, "/v1/nodes", map[string]any{
		"name": "metal3~vm-redfish", "driver": rfdriver.HardwareType, "driver_info": info,
		"boot_interface": rfdriver.ImplVirtualMedia, "inspect_interface": "agent", "firmware_interface": rfdriver.ImplRedfish,
		"management_interface": rfdriver.ImplRedfish, "power_interface": rfdriver.ImplRedfish,
		"disable_power_off": false, "properties": map[string]any{"capabilities": "boot_mode:bios", "cpu_arch": "x86_64"},
	})
	node, _ := nd["uuid"].(string)
	if node == "" || nd["inspect_interface"] != "agent" {
		lab.fail(t, "POST /v1/nodes: %v", nd)
	}
	lab.node = node
	go lab.trackSteps(ctx)
	api.must(http.StatusCreated, http.MethodPost, "/v1/ports", map[string]any{"node_uuid": node, "address": e2eMAC, "pxe_enabled": true})
	api.provision(node, map[string]any{"target": "manage"})
	nd = api.waitProvision(node, "manageable", 5*time.Minute)
	if nd["power_state"] != "power off" {
		lab.fail(t, "manageable with power %v; the machine is off", nd["power_state"])
	}
	phase("register", start)

	// 2. Inspect in band: never inspected (404), then the agent's
	// inventory, every NIC with its pxe flag.
	start = time.Now()
	if code, _ := api.do(http.MethodGet, "/v1/nodes/"+node+"/inventory", nil); code != http.StatusNotFound {
		lab.fail(t, "inventory before inspection: %d, want 404 (BMO's never inspected)", code)
	}
	api.provision(node, map[string]any{"target": "inspect"})
	api.waitProvision(node, "manageable", 25*time.Minute)
	inv := api.must(http.StatusOK, http.MethodGet, "/v1/nodes/"+node+"/inventory", nil)
	nics := checkPXEFlags(t, lab, inv)
	t.Logf("in-band inventory: NICs %v", nics)
	lab.checkBootISOBuilt(t, start)
	phase("inspect (agent, in band)", start)

	// 3. Inspect out of band (BMO's fast inspection names the BMC's own
	// inspect interface): the inventory exists afterwards, the BMC's.
	start = time.Now()
	api.must(http.StatusOK, http.MethodPatch, "/v1/nodes/"+node, []map[string]any{{"op": "add", "path": "/inspect_interface", "value": rfdriver.ImplRedfish}})
	api.provision(node, map[string]any{"target": "inspect"})
	api.waitProvision(node, "manageable", 5*time.Minute)
	oob := api.must(http.StatusOK, http.MethodGet, "/v1/nodes/"+node+"/inventory", nil)
	oobInv, _ := oob["inventory"].(map[string]any)
	if mem, _ := oobInv["memory"].(map[string]any); fmt.Sprint(mem["physical_mb"]) != "1024" {
		lab.fail(t, "out-of-band inventory memory %v, want the BMC's 1024 MiB: %v", oobInv["memory"], oob)
	}
	if mustJSON(oob) == mustJSON(inv) {
		lab.fail(t, "the inventory after out-of-band inspection is the in-band one")
	}
	t.Logf("out-of-band inventory: NICs %v", checkPXEFlags(t, lab, oob))
	api.must(http.StatusOK, http.MethodPatch, "/v1/nodes/"+node, []map[string]any{{"op": "add", "path": "/inspect_interface", "value": "agent"}})
	phase("inspect (redfish, out of band)", start)

	// 4. Provide: automated cleaning.
	start = time.Now()
	api.provision(node, map[string]any{"target": "provide"})
	api.waitProvision(node, "available", 25*time.Minute)
	lab.checkErased(t, "after provide")
	phase("provide", start)

	// 5. Deploy as BMO's Provision: the instance_info patch, validate, a
	// config drive.
	start = time.Now()
	api.must(http.StatusOK, http.MethodPatch, "/v1/nodes/"+node, []map[string]any{
		{"op": "add", "path": "/instance_uuid", "value": "4f1d8b1e-3c2a-4b6e-9a77-0d7c3f1e2a10"},
		{"op": "add", "path": "/instance_info/capabilities", "value": map[string]any{}},
		{"op": "add", "path": "/instance_info/root_device", "value": map[string]any{"serial": e2eRootDisk}},
		{"op": "add", "path": "/instance_info/image_source", "value": "http://" + net.JoinHostPort(ServerIP, e2eImageHTTP) + "/disk.raw"},
		{"op": "add", "path": "/instance_info/image_disk_format", "value": "raw"},
		{"op": "add", "path": "/instance_info/image_os_hash_algo", "value": "sha256"},
		{"op": "add", "path": "/instance_info/image_os_hash_value", "value": lab.img.RawSHA256},
		{"op": "add", "path": "/driver_info/force_persistent_boot_device", "value": "Default"},
	})
	val := api.must(http.StatusOK, http.MethodGet, "/v1/nodes/"+node+"/validate", nil)
	for _, k := range []string{"boot", "deploy"} {
		if r, _ := val[k].(map[string]any); r["result"] != true {
			lab.fail(t, "validate: %s %v", k, val[k])
		}
	}
	api.provision(node, map[string]any{"target": "active", "configdrive": map[string]any{
		"meta_data": map[string]any{"uuid": "4f1d8b1e-3c2a-4b6e-9a77-0d7c3f1e2a10", "metal3-namespace": "metal3", "metal3-name": "vm-redfish",
			"local-hostname": e2eHostname, "local_hostname": e2eHostname, "name": "vm-redfish", "hostname": e2eHostname},
		"user_data": "#cloud-config\nanvil-marker: metal3\n",
	}})
	api.waitProvision(node, "active", 25*time.Minute)
	marker := lab.osMarker(t, start, "metal3", 10*time.Minute)
	t.Logf("active; OS marker %.1fs after the deploy began: %q", marker.At.Sub(start).Seconds(), marker.Text)
	lab.checkImageWritten(t)
	phase("deploy", start)

	// 6. Power off and on, as BMO's manageHostPower.
	start = time.Now()
	api.must(http.StatusAccepted, http.MethodPut, "/v1/nodes/"+node+"/states/power", map[string]any{"target": "power off"})
	off := api.waitField(node, "power_state", "power off", 3*time.Minute)
	if lab.m.Powered() {
		lab.fail(t, "power off answered, QEMU still running")
	}
	api.must(http.StatusAccepted, http.MethodPut, "/v1/nodes/"+node+"/states/power", map[string]any{"target": "power on"})
	on := api.waitField(node, "power_state", "power on", 3*time.Minute)
	if !lab.m.Powered() {
		lab.fail(t, "power on answered, QEMU not running")
	}
	t.Logf("power off in %.1fs, on in %.1fs", off.Seconds(), on.Seconds())
	phase("power off and on", start)

	// 7. Health follows the BMC: a failed fan, then repaired.
	start = time.Now()
	rm, ok := lab.m.(*RedfishMachine)
	if !ok {
		t.Fatalf("the lab machine is a %T, not the Redfish machine", lab.m)
	}
	api.waitField(node, "health", "OK", 3*metal3PowerSync+time.Minute)
	rm.SetFanFailed(true)
	failed := api.waitField(node, "health", "Critical", 3*metal3PowerSync+time.Minute)
	rm.SetFanFailed(false)
	repaired := api.waitField(node, "health", "OK", 3*metal3PowerSync+time.Minute)
	t.Logf("health Critical %.1fs after the fan failed, OK %.1fs after its repair (power sync every %s)", failed.Seconds(), repaired.Seconds(), metal3PowerSync)
	phase("health", start)

	// 8. Deprovision: cleaning erases the disk.
	start = time.Now()
	api.provision(node, map[string]any{"target": "deleted"})
	api.waitProvision(node, "available", 25*time.Minute)
	lab.checkErased(t, "after deprovision")
	phase("deprovision", start)

	// 9. A live ISO through the ramdisk deploy interface, cleaning off
	// (BMO's automated_clean false).
	start = time.Now()
	api.must(http.StatusOK, http.MethodPatch, "/v1/nodes/"+node, []map[string]any{
		{"op": "add", "path": "/deploy_interface", "value": "ramdisk"},
		{"op": "add", "path": "/automated_clean", "value": false},
		{"op": "add", "path": "/instance_info/boot_iso", "value": httpURL + "/html/live.iso"},
	})
	api.provision(node, map[string]any{"target": "active"})
	api.waitProvision(node, "active", 10*time.Minute)
	lctx, lcancel := context.WithTimeout(ctx, 10*time.Minute)
	line, err := lab.m.serial().WaitForAfter(lctx, start, CmdlinePrefix)
	lcancel()
	if err != nil {
		lab.fail(t, "the live ISO's kernel never printed its command line: %v", err)
	}
	if !strings.Contains(line.Text, liveArgs) {
		lab.fail(t, "live ISO command line %q lacks %q", line.Text, liveArgs)
	}
	t.Logf("live ISO booted: command line printed %.1fs after the deploy began", line.At.Sub(start).Seconds())
	api.provision(node, map[string]any{"target": "deleted"})
	api.waitProvision(node, "available", 10*time.Minute)
	phase("live ISO (ramdisk deploy)", start)

	// 10. Delete, as BMO: power off, then DELETE; the node is gone.
	start = time.Now()
	if nd := api.must(http.StatusOK, http.MethodGet, "/v1/nodes/"+node, nil); nd["power_state"] != "power off" {
		api.must(http.StatusAccepted, http.MethodPut, "/v1/nodes/"+node+"/states/power", map[string]any{"target": "power off"})
		api.waitField(node, "power_state", "power off", 3*time.Minute)
	}
	api.must(http.StatusNoContent, http.MethodDelete, "/v1/nodes/"+node, nil)
	if code, _ := api.do(http.MethodGet, "/v1/nodes/"+node, nil); code != http.StatusNotFound {
		lab.fail(t, "GET the deleted node: %d, want 404", code)
	}
	phase("delete", start)
}

// checkPXEFlags checks that every NIC of the inventory has its pxe flag
// in plugin_data.all_interfaces, the lab's NIC true, and returns the
// NICs with their flags.
func checkPXEFlags(t *testing.T, lab *e2eLab, doc map[string]any) map[string]any {
	t.Helper()
	inv, _ := doc["inventory"].(map[string]any)
	ifaces, _ := inv["interfaces"].([]any)
	pd, _ := doc["plugin_data"].(map[string]any)
	all, _ := pd["all_interfaces"].(map[string]any)
	if len(ifaces) == 0 {
		lab.fail(t, "the inventory has no interfaces: %v", doc)
	}
	flags := map[string]any{}
	labNIC := false
	for _, i := range ifaces {
		im, _ := i.(map[string]any)
		name, _ := im["name"].(string)
		a, _ := all[name].(map[string]any)
		pxe, ok := a["pxe_enabled"].(bool)
		if !ok {
			lab.fail(t, "NIC %q has no pxe flag in plugin_data.all_interfaces (%v)", name, all)
		}
		flags[name] = pxe
		if strings.EqualFold(fmt.Sprint(im["mac_address"]), e2eMAC) {
			labNIC = true
			if !pxe {
				lab.fail(t, "the lab's NIC %s (%s) has pxe false", name, e2eMAC)
			}
		}
	}
	if !labNIC {
		lab.fail(t, "the inventory lacks the lab's NIC %s: %v", e2eMAC, ifaces)
	}
	return flags
}

// checkBootISOBuilt checks that the BMC inserted the node's boot ISO,
// which the plugin built from deploy_kernel and deploy_ramdisk, since
// from: the media server served it and the deploy kernel was fetched
// from the images server.
func (lab *e2eLab) checkBootISOBuilt(t *testing.T, from time.Time) {
	t.Helper()
	var media, kernel bool
	for _, e := range lab.tl.between(from, time.Now()) {
		media = media || e.Source == "media" && strings.Contains(e.What, "-boot.iso") && strings.HasSuffix(e.What, "→ 200")
		kernel = kernel || e.Source == "httpd" && strings.Contains(e.What, "ironic-python-agent.kernel")
	}
	if !media || !kernel {
		lab.fail(t, "the ramdisk did not boot from the ISO built from deploy_kernel (BMC fetched the boot ISO: %v; kernel fetched: %v)", media, kernel)
	}
}

// writeLiveISO builds the live ISO of the ramdisk deploy: the lab's
// kernel and the marker initramfs, which prints the kernel command line.
func writeLiveISO(ctx context.Context, path, kernel, args string) error {
	cache, err := DefaultCache()
	if err != nil {
		return err
	}
	initrd, err := MarkerInitramfs(cache, "")
	if err != nil {
		return err
	}
	k, err := os.Open(kernel)
	if err != nil {
		return err
	}
	defer k.Close()
	r, err := os.Open(initrd)
	if err != nil {
		return err
	}
	defer r.Close()
	out, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = rfdriver.BuildBootISO(ctx, k, r, args, rfdriver.DefaultBootLoaders(), filepath.Dir(path), out)
	return errors.Join(err, out.Close())
}
