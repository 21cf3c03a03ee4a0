package ironicapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/ironicapi"
	"github.com/anvilmetal/anvil/baremetal/sqlstore/sqlstoretest"
	"github.com/anvilmetal/anvil/clock"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
)

// asyncVendor is a vendor interface with one asynchronous method,
// "reset" (POST), whose runs it counts, and "blob" (GET), whose response
// is attached raw.
type asyncVendor struct {
	mu   sync.Mutex
	runs int
}

func (*asyncVendor) Properties() []driver.Property                { return nil }
func (*asyncVendor) Validate(context.Context, *driver.Task) error { return nil }
func (*asyncVendor) Methods() []driver.VendorMethod {
	return []driver.VendorMethod{
		{Name: "reset", HTTPMethods: []string{"POST"}, Async: true, Description: "Resets the BMC."},
		{Name: "blob", HTTPMethods: []string{"GET"}, AttachResponse: true},
	}
}

func (v *asyncVendor) Call(_ context.Context, _ *driver.Task, method, _ string, _ map[string]any) (any, error) {
	if method == "blob" {
		return "raw bytes", nil
	}
	v.mu.Lock()
	v.runs++
	v.mu.Unlock()
	return nil, nil
}

func (v *asyncVendor) count() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.runs
}

// syncLab is an API server on a conductor (SQLite, fake-hardware) whose
// registry also enables the no-op bios, raid, firmware and vendor
// implementations and the "async" vendor, with a lock policy that fails
// a locked node in milliseconds.
func syncLab(t *testing.T) (*lab, *asyncVendor, baremetal.Store) {
	t.Helper()
	store := sqlstoretest.OpenSQLite(t, clock.System())
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware},
		EnabledInterfaces: map[driver.Kind][]string{
			driver.KindBIOS:     {fake.Name, driver.NoBIOS},
			driver.KindRAID:     {fake.Name, driver.NoRAID},
			driver.KindFirmware: {fake.Name, driver.NoFirmware},
			driver.KindVendor:   {fake.Name, driver.NoVendor, "async"},
		}})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		t.Fatal(err)
	}
	av := &asyncVendor{}
	if err := reg.RegisterInterface(driver.KindVendor, "async", av); err != nil {
		t.Fatal(err)
	}
	c, err := conductor.New(store, reg, conductor.Options{Hostname: "sync-api",
		LockPolicy: &baremetal.LockPolicy{Attempts: 2, Interval: 5 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Launch(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop(context.Background()) })
	ao := ironicapi.Options{Conductor: c, Drivers: reg}
	h, err := ironicapi.New(ao)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &lab{srv: srv, c: c, reg: reg, api: h, opts: ao}, av, store
}

// syncNode creates a fake-hardware node through gophercloud.
func syncNode(t *testing.T, sc *gophercloud.ServiceClient, opts nodes.CreateOpts) *nodes.Node {
	t.Helper()
	if opts.Driver == "" {
		opts.Driver = builtin.FakeHardware
	}
	n, err := nodes.Create(context.Background(), sc, opts).Extract()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// wantStatus fails unless err is a gophercloud error with status code.
func wantStatus(t *testing.T, what string, err error, code int) {
	t.Helper()
	var ge gophercloud.ErrUnexpectedResponseCode
	if !errors.As(err, &ge) || ge.Actual != code {
		t.Errorf("%s: error %v, want HTTP %d", what, err, code)
	}
}

func jsonOf(t *testing.T, body string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("body %q: %v", body, err)
	}
	return m
}

func TestValidateEndpoint(t *testing.T) {
	l, _, _ := syncLab(t)
	ctx := context.Background()
	sc := l.client(t, "1.89")
	good := syncNode(t, sc, nodes.CreateOpts{Name: "v-good"})
	nobios := syncNode(t, sc, nodes.CreateOpts{Name: "v-nobios", BIOSInterface: driver.NoBIOS, DriverInfo: map[string]any{"fake_password": "s3cret"}})
	v, err := nodes.Validate(ctx, sc, good.UUID).Extract()
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]nodes.DriverValidation{"bios": v.BIOS, "boot": v.Boot, "deploy": v.Deploy, "firmware": v.Firmware,
		"inspect": v.Inspect, "management": v.Management, "network": v.Network, "power": v.Power, "raid": v.RAID,
		"rescue": v.Rescue, "storage": v.Storage} {
		if !r.Result || r.Reason != "" {
			t.Errorf("%s: %+v, want a pass", name, r)
		}
	}
	v, err = nodes.Validate(ctx, sc, "v-nobios").Extract()
	if err != nil {
		t.Fatal(err)
	}
	if v.BIOS.Result || !strings.Contains(v.BIOS.Reason, "not supported") || !v.Power.Result {
		t.Errorf("no-bios node: bios %+v power %+v", v.BIOS, v.Power)
	}
	// Raw: a pass has no reason key, vendor is not reported, the query
	// form answers alike, and no reason leaks driver_info.
	st, _, body := do(t, "GET", l.srv.URL+"/v1/nodes/"+nobios.UUID+"/validate", "", "")
	if st != 200 {
		t.Fatalf("validate at 1.1: %d %s", st, body)
	}
	m := jsonOf(t, body)
	if _, ok := m["vendor"]; ok || len(m) != 12 {
		t.Errorf("interfaces %v, want the 12 of Ironic's non_vendor_interfaces", m)
	}
	if _, ok := m["power"].(map[string]any)["reason"]; ok {
		t.Errorf("a passing interface has a reason: %v", m["power"])
	}
	if strings.Contains(body, "s3cret") {
		t.Errorf("validate body carries a secret: %s", body)
	}
	st, _, body2 := do(t, "GET", l.srv.URL+"/v1/nodes/validate?node=v-nobios", "1.5", "")
	if st != 200 || len(jsonOf(t, body2)) != 12 {
		t.Errorf("GET /v1/nodes/validate?node=: %d %s", st, body2)
	}
	for _, c := range []struct {
		url, version string
		status       int
	}{
		{"/v1/nodes/nope/validate", "1.89", 404},
		{"/v1/nodes/validate", "1.89", 400},
		{"/v1/nodes/validate?node=v-good", "1.1", 406}, // names need 1.5
	} {
		if st, _, body := do(t, "GET", l.srv.URL+c.url, c.version, ""); st != c.status {
			t.Errorf("GET %s at %s: %d %s, want %d", c.url, c.version, st, body, c.status)
		}
	}
}

func TestBootDeviceEndpoints(t *testing.T) {
	l, _, store := syncLab(t)
	ctx := context.Background()
	sc := l.client(t, "1.89")
	n := syncNode(t, sc, nodes.CreateOpts{Name: "bd"})
	if err := nodes.SetBootDevice(ctx, sc, n.UUID, nodes.BootDeviceOpts{BootDevice: "disk", Persistent: true}).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	bd, err := nodes.GetBootDevice(ctx, sc, "bd").Extract()
	if err != nil || bd.BootDevice != "disk" || !bd.Persistent {
		t.Fatalf("boot device %+v %v", bd, err)
	}
	devs, err := nodes.GetSupportedBootDevices(ctx, sc, n.UUID).Extract()
	if err != nil || strings.Join(devs, ",") != "pxe,disk,cdrom,bios,safe" {
		t.Fatalf("supported %v %v", devs, err)
	}
	base := l.srv.URL + "/v1/nodes/" + n.UUID + "/management/boot_device"
	cases := []struct {
		name, method, url, body string
		status                  int
		fault                   string
	}{
		{"set pxe once", "PUT", base, `{"boot_device":"pxe"}`, 204, ""},
		{"persistent as a string", "PUT", base, `{"boot_device":"pxe","persistent":"true"}`, 204, ""},
		{"unsupported device", "PUT", base, `{"boot_device":"floppy"}`, 400, "boot_device"},
		{"no device", "PUT", base, `{"persistent":true}`, 400, "boot_device"},
		{"unknown argument", "PUT", base, `{"boot_device":"pxe","force":true}`, 400, "force"},
		{"bad persistent", "PUT", base, `{"boot_device":"pxe","persistent":"maybe"}`, 400, "persistent"},
		{"not an object", "PUT", base, `["pxe"]`, 400, ""},
		{"unknown node", "GET", l.srv.URL + "/v1/nodes/nope/management/boot_device", "", 404, "nope"},
	}
	for _, c := range cases {
		st, _, body := do(t, c.method, c.url, "1.89", c.body)
		if st != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, st, body, c.status)
			continue
		}
		if st == 204 && body != "" {
			t.Errorf("%s: 204 with a body %q", c.name, body)
		}
		if c.fault != "" && !strings.Contains(faultString(t, body), c.fault) {
			t.Errorf("%s: fault %q does not name %q", c.name, faultString(t, body), c.fault)
		}
	}
	st, _, body := do(t, "GET", base, "1.89", "")
	if m := jsonOf(t, body); st != 200 || m["boot_device"] != "pxe" || m["persistent"] != true {
		t.Errorf("GET after the string persistent: %d %s", st, body)
	}
	// A node locked by another conductor: 409 with Retry-After, quickly,
	// and the other conductor keeps its lock.
	if _, err := store.ReserveNode(ctx, n.UUID, "other-host"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	st, hdr, body := do(t, "PUT", base, "1.89", `{"boot_device":"pxe"}`)
	if st != 409 || hdr.Get("Retry-After") == "" || !strings.Contains(faultString(t, body), "other-host") || time.Since(start) > 2*time.Second {
		t.Errorf("locked: %d %v %s after %v", st, hdr, body, time.Since(start))
	}
	err = nodes.GetBootDevice(ctx, sc, n.UUID).Err
	wantStatus(t, "get on a locked node", err, 409)
	if _, err := nodes.GetSupportedBootDevices(ctx, sc, n.UUID).Extract(); err != nil {
		t.Errorf("supported devices (a shared read) on a locked node: %v", err)
	}
	if got, _ := store.GetNode(ctx, n.UUID); got.Reservation != "other-host" {
		t.Errorf("reservation %q after the refused calls", got.Reservation)
	}
}

func TestInjectNMIEndpoint(t *testing.T) {
	l, _, store := syncLab(t)
	ctx := context.Background()
	n := syncNode(t, l.client(t, "1.89"), nodes.CreateOpts{Name: "nmi"})
	if err := nodes.InjectNMI(ctx, l.client(t, "1.29"), n.UUID).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	got, _ := store.GetNode(ctx, n.UUID)
	if got.DriverInternalInfo[fake.NMICountKey] != float64(1) {
		t.Errorf("nmi count %v", got.DriverInternalInfo[fake.NMICountKey])
	}
	wantStatus(t, "inject_nmi at 1.28", nodes.InjectNMI(ctx, l.client(t, "1.28"), n.UUID).ExtractErr(), 404)
	wantStatus(t, "inject_nmi on an unknown node", nodes.InjectNMI(ctx, l.client(t, "1.29"), "nope").ExtractErr(), 404)
}

func TestRAIDConfigEndpoint(t *testing.T) {
	l, _, store := syncLab(t)
	ctx := context.Background()
	sc := l.client(t, "1.89")
	n := syncNode(t, sc, nodes.CreateOpts{Name: "raid"})
	noraid := syncNode(t, sc, nodes.CreateOpts{Name: "noraid", RAIDInterface: driver.NoRAID})
	root := true
	err := nodes.SetRAIDConfig(ctx, sc, n.UUID, nodes.RAIDConfigOpts{LogicalDisks: []nodes.LogicalDisk{
		{SizeGB: new(int), RAIDLevel: nodes.RAID1, IsRootVolume: &root},
	}}).ExtractErr()
	if err != nil {
		t.Fatal(err)
	}
	got, _ := store.GetNode(ctx, n.UUID)
	disks, _ := got.TargetRAIDConfig["logical_disks"].([]any)
	if len(disks) != 1 || disks[0].(map[string]any)["raid_level"] != "1" {
		t.Fatalf("target_raid_config %v", got.TargetRAIDConfig)
	}
	url := l.srv.URL + "/v1/nodes/" + n.UUID + "/states/raid"
	cases := []struct {
		name, url, version, body string
		status                   int
	}{
		{"refused by the raid interface", url, "1.89", `{"logical_disks": []}`, 400},
		{"not an object", url, "1.89", `[1]`, 400},
		{"before 1.12", url, "1.11", `{}`, 406},
		{"no raid interface", l.srv.URL + "/v1/nodes/" + noraid.UUID + "/states/raid", "1.89", `{"logical_disks": [{"size_gb": 10, "raid_level": "0"}]}`, 404},
		{"unknown node", l.srv.URL + "/v1/nodes/nope/states/raid", "1.89", `{}`, 404},
		{"clear", url, "1.12", `{}`, 204},
	}
	for _, c := range cases {
		if st, _, body := do(t, "PUT", c.url, c.version, c.body); st != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, st, body, c.status)
		}
	}
	if got, _ := store.GetNode(ctx, n.UUID); got.TargetRAIDConfig != nil {
		t.Errorf("target_raid_config after {}: %v", got.TargetRAIDConfig)
	}
}

func TestBIOSEndpoints(t *testing.T) {
	l, _, _ := syncLab(t)
	ctx := context.Background()
	n := syncNode(t, l.client(t, "1.89"), nodes.CreateOpts{Name: "bios"})
	nobios := syncNode(t, l.client(t, "1.89"), nodes.CreateOpts{Name: "nobios", BIOSInterface: driver.NoBIOS})
	list, err := nodes.ListBIOSSettings(ctx, l.client(t, "1.40"), "bios", nil).Extract()
	if err != nil || len(list) != 2 || list[0].Name != "BootMode" || list[0].Value != "Uefi" || list[0].AttributeType != "" {
		t.Fatalf("bios at 1.40: %+v %v", list, err)
	}
	detail, err := nodes.ListBIOSSettings(ctx, l.client(t, "1.74"), n.UUID, nodes.ListBIOSSettingsOpts{Detail: true}).Extract()
	if err != nil || len(detail) != 2 || detail[0].AttributeType != "String" || detail[0].ReadOnly == nil || detail[0].AllowableValues == nil {
		t.Fatalf("bios detail at 1.74: %+v %v", detail, err)
	}
	// GET of one setting is {"<name>": {...}} as Ironic answers it
	// (gophercloud's SingleBIOSSetting expects a "Setting" key instead).
	var one map[string]nodes.BIOSSetting
	if err := nodes.GetBIOSSetting(ctx, l.client(t, "1.74"), n.UUID, "ProcVirtualization").ExtractInto(&one); err != nil {
		t.Fatal(err)
	}
	if s := one["ProcVirtualization"]; s.Value != "Enabled" || s.AttributeType != "String" {
		t.Errorf("one setting %+v", one)
	}
	empty, err := nodes.ListBIOSSettings(ctx, l.client(t, "1.74"), nobios.UUID, nil).Extract()
	if err != nil || len(empty) != 0 {
		t.Errorf("no-bios node: %+v %v, want Ironic's empty list", empty, err)
	}
	base := l.srv.URL + "/v1/nodes/" + n.UUID + "/bios"
	st, _, body := do(t, "GET", base, "1.40", "")
	entry := jsonOf(t, body)["bios"].([]any)[0].(map[string]any)
	if st != 200 || len(entry) != 5 || entry["created_at"] == nil || entry["links"] == nil || entry["updated_at"] != nil {
		t.Errorf("entry at 1.40: %d %v, want name, value, created_at, updated_at and links", st, entry)
	}
	if links := entry["links"].([]any); !strings.HasSuffix(links[0].(map[string]any)["href"].(string), "/v1/nodes/"+n.UUID+"/bios/BootMode") {
		t.Errorf("links %v", links)
	}
	st, _, body = do(t, "GET", base+"?fields=name", "1.74", "")
	entry = jsonOf(t, body)["bios"].([]any)[0].(map[string]any)
	if _, hasValue := entry["value"]; st != 200 || hasValue || entry["name"] != "BootMode" {
		t.Errorf("?fields=name: %d %v", st, entry)
	}
	for _, c := range []struct {
		name, url, version string
		status             int
	}{
		{"before 1.40", base, "1.39", 404},
		{"detail before 1.74", base + "?detail=True", "1.73", 400},
		{"detail and fields", base + "?detail=True&fields=name", "1.74", 400},
		{"unknown field", base + "?fields=colour", "1.74", 400},
		{"unknown query", base + "?sort=name", "1.74", 400},
		{"unknown setting", base + "/NoSuchSetting", "1.74", 404},
		{"unknown node", l.srv.URL + "/v1/nodes/nope/bios", "1.74", 404},
		{"one setting before 1.40", base + "/BootMode", "1.39", 404},
	} {
		if st, _, body := do(t, "GET", c.url, c.version, ""); st != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, st, body, c.status)
		}
	}
	st, _, body = do(t, "GET", base+"/BootMode", "1.73", "")
	if m := jsonOf(t, body)["BootMode"].(map[string]any); st != 200 || len(m) != 5 || m["value"] != "Uefi" {
		t.Errorf("one setting at 1.73: %d %v", st, m)
	}
}

func TestFirmwareEndpoint(t *testing.T) {
	l, _, _ := syncLab(t)
	ctx := context.Background()
	n := syncNode(t, l.client(t, "1.89"), nodes.CreateOpts{Name: "fw"})
	comps, err := nodes.ListFirmware(ctx, l.client(t, "1.86"), n.UUID).Extract()
	if err != nil || len(comps) != 2 || comps[0].Component != "bios" || comps[0].CurrentVersion != "1.0.0" || comps[0].CreatedAt.IsZero() {
		t.Fatalf("firmware %+v %v", comps, err)
	}
	wantStatus(t, "firmware at 1.85", nodes.ListFirmware(ctx, l.client(t, "1.85"), n.UUID).Err, 404)
	nofw := syncNode(t, l.client(t, "1.89"), nodes.CreateOpts{Name: "nofw", FirmwareInterface: driver.NoFirmware})
	if comps, err := nodes.ListFirmware(ctx, l.client(t, "1.86"), nofw.UUID).Extract(); err != nil || len(comps) != 0 {
		t.Errorf("no-firmware node: %+v %v", comps, err)
	}
	st, _, body := do(t, "GET", l.srv.URL+"/v1/nodes/"+n.UUID+"/firmware", "1.86", "")
	entry := jsonOf(t, body)["firmware"].([]any)[0].(map[string]any)
	if st != 200 || len(entry) != 6 || entry["last_version_flashed"] != nil {
		t.Errorf("firmware entry %d %v", st, entry)
	}
}

func TestVendorPassthruEndpoints(t *testing.T) {
	l, av, store := syncLab(t)
	ctx := context.Background()
	sc := l.client(t, "1.89")
	n := syncNode(t, sc, nodes.CreateOpts{Name: "vendor"})
	async := syncNode(t, sc, nodes.CreateOpts{Name: "vendor-async", VendorInterface: "async"})
	ms, err := nodes.ListVendorPassthruMethods(ctx, sc, n.UUID).Extract()
	if err != nil || len(ms) != 2 || strings.Join(ms["echo"].HTTPMethods, ",") != "GET,POST" || !ms["first_method"].RequireExclusiveLock {
		t.Fatalf("methods %+v %v", ms, err)
	}
	res, err := nodes.CallVendorPassthru(ctx, sc, n.UUID, "POST", nodes.VendorPassthruCallOpts{Method: "first_method", Body: map[string]any{"bar": "baz"}}).Extract()
	if err != nil || res["bar"] != "baz" {
		t.Fatalf("first_method: %v %v", res, err)
	}
	res, err = nodes.CallVendorPassthru(ctx, sc, n.UUID, "POST", nodes.VendorPassthruCallOpts{Method: "echo", Body: map[string]any{"n": 7}}).Extract()
	if err != nil || res["n"] != float64(7) {
		t.Fatalf("echo: %v %v", res, err)
	}
	r := nodes.CallVendorPassthru(ctx, sc, async.UUID, "POST", nodes.VendorPassthruCallOpts{Method: "reset"})
	if r.Err != nil || r.StatusCode != 202 {
		t.Fatalf("async reset: status %d %v", r.StatusCode, r.Err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, _ := store.GetNode(ctx, async.UUID)
		if av.count() == 1 && got.Reservation == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("async method: %d runs, reservation %q", av.count(), got.Reservation)
		}
		time.Sleep(2 * time.Millisecond)
	}
	base := l.srv.URL + "/v1/nodes/" + n.UUID + "/vendor_passthru"
	for _, c := range []struct {
		name, method, url, body string
		status                  int
		want                    string // exact body, or the fault's substring
	}{
		{"sync 200", "GET", base + "?method=echo", "", 200, `{}`},
		{"missing argument", "POST", base + "?method=first_method", `{}`, 400, "bar"},
		{"wrong verb", "GET", base + "?method=first_method", "", 400, "does not support HTTP GET"},
		{"unknown method", "POST", base + "?method=nope", "", 400, "no handler for method nope"},
		{"no method", "POST", base, "", 400, "Method not specified"},
		{"body not an object", "POST", base + "?method=echo", `[1]`, 400, "JSON object"},
		{"async 202", "POST", l.srv.URL + "/v1/nodes/" + async.UUID + "/vendor_passthru?method=reset", "", 202, ""},
		{"attached", "GET", l.srv.URL + "/v1/nodes/" + async.UUID + "/vendor_passthru?method=blob", "", 200, "raw bytes"},
		{"unknown node", "GET", l.srv.URL + "/v1/nodes/nope/vendor_passthru?method=echo", "", 404, "nope"},
		{"methods of no-vendor", "GET", l.srv.URL + "/v1/nodes/" + syncNode(t, sc, nodes.CreateOpts{VendorInterface: driver.NoVendor}).UUID + "/vendor_passthru/methods", "", 200, `{}`},
	} {
		st, _, body := do(t, c.method, c.url, "1.89", c.body)
		switch {
		case st != c.status:
			t.Errorf("%s: %d %s, want %d", c.name, st, body, c.status)
		case st >= 400 && !strings.Contains(faultString(t, body), c.want):
			t.Errorf("%s: fault %q does not contain %q", c.name, faultString(t, body), c.want)
		case st < 400 && body != c.want:
			t.Errorf("%s: body %q, want %q", c.name, body, c.want)
		}
	}
}

func TestVirtualMediaEndpoints(t *testing.T) {
	l, _, store := syncLab(t)
	ctx := context.Background()
	sc := l.client(t, "1.93")
	n := syncNode(t, sc, nodes.CreateOpts{Name: "vmedia"})
	const iso = "http://192.0.2.10/boot.iso"
	if err := nodes.AttachVirtualMedia(ctx, l.client(t, "1.89"), n.UUID, nodes.AttachVirtualMediaOpts{
		DeviceType: nodes.VirtualMediaCD, ImageURL: iso, ImageDownloadSource: nodes.ImageDownloadSourceHTTP}).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	// Attached in the background after the 204, as Ironic does.
	waitStoredUnreserved(t, l, n.UUID)
	r := nodes.GetVirtualMedia(ctx, sc, n.UUID)
	var list []map[string]any
	if err := r.ExtractInto(&list); err != nil {
		t.Fatal(err)
	}
	if len(list) != 3 || list[0]["inserted"] != true || list[0]["image"] != iso || fmt.Sprint(list[0]["media_types"]) != "[CD DVD]" {
		t.Fatalf("virtual media %v", list)
	}
	if err := nodes.DetachVirtualMedia(ctx, l.client(t, "1.89"), n.UUID, nodes.DetachVirtualMediaOpts{
		DeviceTypes: []nodes.VirtualMediaDeviceType{nodes.VirtualMediaCD}}).ExtractErr(); err != nil {
		t.Fatal(err)
	}
	if got, _ := store.GetNode(ctx, n.UUID); got.DriverInternalInfo[fake.VirtualMediaKey] != nil {
		t.Errorf("the cdrom is still recorded: %v", got.DriverInternalInfo[fake.VirtualMediaKey])
	}
	wantStatus(t, "GET vmedia at 1.92", nodes.GetVirtualMedia(ctx, l.client(t, "1.92"), n.UUID).Err, 404)
	wantStatus(t, "attach at 1.88", nodes.AttachVirtualMedia(ctx, l.client(t, "1.88"), n.UUID, nodes.AttachVirtualMediaOpts{
		DeviceType: nodes.VirtualMediaCD, ImageURL: iso}).ExtractErr(), 404)
	base := l.srv.URL + "/v1/nodes/" + n.UUID + "/vmedia"
	for _, c := range []struct {
		name, method, url, body string
		status                  int
	}{
		{"default download source", "POST", base, `{"device_type":"floppy","image_url":"https://192.0.2.10/f.img"}`, 204},
		{"detach all", "DELETE", base, "", 204},
		{"bad device", "POST", base, `{"device_type":"tape","image_url":"` + iso + `"}`, 400},
		{"bad scheme", "POST", base, `{"device_type":"cdrom","image_url":"ftp://192.0.2.10/a.iso"}`, 400},
		{"local nfs", "POST", base, `{"device_type":"cdrom","image_url":"nfs://192.0.2.10/a.iso"}`, 400},
		{"password in url", "POST", base, `{"device_type":"cdrom","image_url":"http://u:hunter2@192.0.2.10/a.iso"}`, 400},
		{"unknown argument", "POST", base, `{"device_type":"cdrom","image_url":"` + iso + `","insecure":true}`, 400},
		{"missing url", "POST", base, `{"device_type":"cdrom"}`, 400},
		{"detach bad device", "DELETE", base + "?device_types=cdrom,tape", "", 400},
		{"unknown node", "POST", l.srv.URL + "/v1/nodes/nope/vmedia", `{"device_type":"cdrom","image_url":"` + iso + `"}`, 404},
	} {
		st, _, body := do(t, c.method, c.url, "1.93", c.body)
		if st != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, st, body, c.status)
		}
		waitStoredUnreserved(t, l, n.UUID)
		if strings.Contains(body, "hunter2") {
			t.Errorf("%s: the body carries the URL's password: %s", c.name, body)
		}
	}
	if got, _ := store.GetNode(ctx, n.UUID); got.DriverInternalInfo[fake.VirtualMediaKey] != nil || got.Reservation != "" {
		t.Errorf("after detach all: %v, reservation %q", got.DriverInternalInfo[fake.VirtualMediaKey], got.Reservation)
	}
}
