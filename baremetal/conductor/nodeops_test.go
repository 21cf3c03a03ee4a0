package conductor_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/mock/gomock"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/clock"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/drivermock"
	"github.com/anvilmetal/anvil/driver/fake"
)

// syncLock is the lock policy of the synchronous-operation tests: two
// attempts 5 ms apart, so a locked node fails in milliseconds.
func syncLock() *baremetal.LockPolicy {
	return &baremetal.LockPolicy{Attempts: 2, Interval: 5 * time.Millisecond, Clock: clock.System()}
}

// vendorRec is a vendor interface the tests script through a generated
// mock: an asynchronous "reset" method (POST) that waits for release and
// fails with fail, and a synchronous "status" (GET).
type vendorRec struct {
	mu      sync.Mutex
	calls   int
	release chan struct{}
	fail    error
	done    chan struct{}
}

func (r *vendorRec) mock(t *testing.T) *drivermock.MockVendorInterface {
	m := drivermock.NewMockVendorInterface(gomock.NewController(t))
	m.EXPECT().Properties().Return(nil).AnyTimes()
	m.EXPECT().Validate(gomock.Any(), gomock.Any()).Return(nil).AnyTimes()
	m.EXPECT().Methods().Return([]driver.VendorMethod{
		{Name: "reset", HTTPMethods: []string{"POST"}, Async: true},
		{Name: "status", HTTPMethods: []string{"GET"}},
	}).AnyTimes()
	m.EXPECT().Call(gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any()).DoAndReturn(
		func(ctx context.Context, tk *driver.Task, method, _ string, _ map[string]any) (any, error) {
			if method == "status" {
				return map[string]any{"ok": true}, nil
			}
			r.mu.Lock()
			r.calls++
			rel, fail, done := r.release, r.fail, r.done
			r.mu.Unlock()
			if rel != nil {
				<-rel
			}
			tk.SetDriverInternalInfo("mock_reset", true)
			if done != nil {
				defer close(done)
			}
			return nil, fail
		}).AnyTimes()
	return m
}

// syncHarness is a conductor on SQLite over fake-hardware with, beside
// the fakes, the no-op bios, raid, firmware and vendor implementations, a
// "plain" management interface (a mock without optional capabilities,
// answering pxe) and the "mock" vendor of rec.
func syncHarness(t *testing.T, rec *vendorRec, opts conductor.Options) *harness {
	t.Helper()
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware},
		EnabledInterfaces: map[driver.Kind][]string{
			driver.KindBIOS:       {fake.Name, driver.NoBIOS},
			driver.KindRAID:       {fake.Name, driver.NoRAID},
			driver.KindFirmware:   {fake.Name, driver.NoFirmware},
			driver.KindVendor:     {fake.Name, driver.NoVendor, "mock"},
			driver.KindManagement: {fake.Name, "plain"},
			driver.KindConsole:    {fake.Name, driver.NoConsole},
		}})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		t.Fatal(err)
	}
	plain := drivermock.NewMockManagementInterface(gomock.NewController(t))
	plain.EXPECT().Properties().Return(nil).AnyTimes()
	plain.EXPECT().Validate(gomock.Any(), gomock.Any()).Return(nil).AnyTimes()
	plain.EXPECT().GetBootDevice(gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, tk *driver.Task) (driver.BootDeviceState, error) {
		if _, ok := tk.DriverInfo["panic"]; ok {
			panic("plain management: scripted panic")
		}
		return driver.BootDeviceState{Device: driver.BootPXE}, nil
	}).AnyTimes()
	if err := reg.RegisterInterface(driver.KindManagement, "plain", plain); err != nil {
		t.Fatal(err)
	}
	if rec == nil {
		rec = &vendorRec{}
	}
	if err := reg.RegisterInterface(driver.KindVendor, "mock", rec.mock(t)); err != nil {
		t.Fatal(err)
	}
	if opts.LockPolicy == nil {
		opts.LockPolicy = syncLock()
	}
	if opts.Hostname == "" {
		opts.Hostname = fmt.Sprintf("sync-%d", time.Now().UnixNano())
	}
	store := openStore(t, false)
	c, err := conductor.New(store, reg, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Launch(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Stop(sctx); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	return &harness{t: t, store: store, c: c, ctx: ctx}
}

// syncNode enrolls a fake-hardware node changed by edit.
func (h *harness) syncNode(edit func(n *baremetal.Node)) *baremetal.Node {
	h.t.Helper()
	n := &baremetal.Node{Name: uniqueName("sync"), Driver: builtin.FakeHardware}
	if edit != nil {
		edit(n)
	}
	out, err := h.c.Enroll(h.ctx, n)
	if err != nil {
		h.t.Fatalf("Enroll: %v", err)
	}
	return out
}

// lockBy reserves the node for another conductor, as an operation in
// progress there would.
func (h *harness) lockBy(uuid, host string) {
	h.t.Helper()
	if _, err := h.store.ReserveNode(h.ctx, uuid, host); err != nil {
		h.t.Fatal(err)
	}
}

// wantReservation fails unless the node's reservation is holder.
func (h *harness) wantReservation(uuid, holder string) *baremetal.Node {
	h.t.Helper()
	n, err := h.store.GetNode(h.ctx, uuid)
	if err != nil {
		h.t.Fatal(err)
	}
	if n.Reservation != holder {
		h.t.Errorf("node %s reserved by %q after the call, want %q", uuid, n.Reservation, holder)
	}
	return n
}

// syncRow is one call of a synchronous operation and what it must
// return; every row ends with the node's reservation as it was.
type syncRow struct {
	name    string
	edit    func(n *baremetal.Node)
	locked  bool   // another conductor holds the node
	unknown bool   // the call names a node that does not exist
	wantErr error  // nil: success
	wantIn  string // the error names this ("" skips; "%s" is the UUID)
}

func runSyncRows(t *testing.T, h *harness, rows []syncRow, call func(t *testing.T, ident string, n *baremetal.Node) error) {
	t.Helper()
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			n := h.syncNode(r.edit)
			ident, holder := n.UUID, ""
			if r.unknown {
				ident = "no-such-node"
			}
			if r.locked {
				holder = "other-conductor"
				h.lockBy(n.UUID, holder)
			}
			start := time.Now()
			err := call(t, ident, n)
			if took := time.Since(start); r.locked && took > 2*time.Second {
				t.Errorf("locked node: the call took %v; the lock policy allows two attempts 5 ms apart", took)
			}
			switch {
			case r.wantErr == nil && err != nil:
				t.Fatalf("error %v, want none", err)
			case r.wantErr != nil && !errors.Is(err, r.wantErr):
				t.Fatalf("error %v, want %v", err, r.wantErr)
			}
			if r.wantIn != "" && !strings.Contains(err.Error(), strings.ReplaceAll(r.wantIn, "%s", n.UUID)) {
				t.Errorf("error %q does not name %q", err, strings.ReplaceAll(r.wantIn, "%s", n.UUID))
			}
			if r.locked && r.wantErr == baremetal.ErrNodeLocked {
				var le *baremetal.NodeLockedError
				if !errors.As(err, &le) || le.Node != n.UUID || le.Holder != holder {
					t.Errorf("locked: error %#v, want a NodeLockedError naming %s and %s", err, n.UUID, holder)
				}
			}
			h.wantReservation(n.UUID, holder)
		})
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	h := syncHarness(t, nil, conductor.Options{DeployTemplates: []conductor.DeployTemplate{
		{Name: "CUSTOM_BROKEN", Steps: []conductor.TemplateStep{{Interface: "deploy", Step: "no_such_step", Priority: 10}}},
	}})
	all := func(want bool) map[string]bool {
		m := map[string]bool{}
		for _, k := range conductor.ValidatedKinds() {
			m[string(k)] = want
		}
		return m
	}
	with := func(m map[string]bool, kv ...any) map[string]bool {
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1].(bool)
		}
		return m
	}
	type row struct {
		name    string
		edit    func(n *baremetal.Node)
		locked  bool
		unknown bool
		wantErr error
		want    map[string]bool
		reason  map[string]string // interface -> reason substring
	}
	rows := []row{
		{name: "all fake", want: all(true)},
		{name: "no-op interfaces", edit: func(n *baremetal.Node) {
			n.BIOSInterface, n.RAIDInterface, n.FirmwareInterface, n.ConsoleInterface = driver.NoBIOS, driver.NoRAID, driver.NoFirmware, driver.NoConsole
		}, want: with(all(true), "bios", false, "raid", false, "firmware", false, "console", false),
			reason: map[string]string{"bios": "not supported", "raid": "not supported", "firmware": "not supported", "console": "not supported"}},
		{name: "bad driver_info fails every fake", edit: func(n *baremetal.Node) {
			n.DriverInfo = map[string]any{fake.DelayKey: "soon", "fake_password": "s3cret-value"}
		}, want: with(all(false), "network", true, "storage", true),
			reason: map[string]string{"power": fake.DelayKey, "deploy": fake.DelayKey}},
		{name: "injected validation failure is unexpected", edit: func(n *baremetal.Node) {
			n.DriverInfo = map[string]any{fake.FailKey: "power.validate"}
		}, want: with(all(true), "power", false), reason: map[string]string{"power": "Unexpected error on conductor"}},
		{name: "broken deploy template", edit: func(n *baremetal.Node) {
			n.InstanceInfo = map[string]any{"traits": []any{"CUSTOM_BROKEN"}}
		}, want: with(all(true), "deploy", false), reason: map[string]string{"deploy": "no_such_step"}},
		{name: "locked node still validates", locked: true, want: all(true)},
		{name: "unknown node", unknown: true, wantErr: baremetal.ErrNotFound},
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			n := h.syncNode(r.edit)
			ident, holder := n.UUID, ""
			if r.unknown {
				ident = "no-such-node"
			}
			if r.locked {
				holder = "other-conductor"
				h.lockBy(n.UUID, holder)
			}
			before, _ := h.store.GetNode(h.ctx, n.UUID)
			got, err := h.c.Validate(h.ctx, ident)
			if !errors.Is(err, r.wantErr) || (err == nil) != (r.wantErr == nil) {
				t.Fatalf("error %v, want %v", err, r.wantErr)
			}
			after := h.wantReservation(n.UUID, holder)
			if after.Version != before.Version {
				t.Errorf("Validate wrote the node (version %d -> %d)", before.Version, after.Version)
			}
			if err != nil {
				return
			}
			if len(got) != len(r.want) {
				t.Errorf("interfaces %v, want %v", got, r.want)
			}
			if _, ok := got["vendor"]; ok {
				t.Error("vendor is reported; Ironic leaves it out")
			}
			for k, want := range r.want {
				res, ok := got[k]
				if !ok || res.Result != want {
					t.Errorf("%s: %+v, want result %v", k, res, want)
				}
				if res.Result && res.Reason != "" {
					t.Errorf("%s: passed with reason %q", k, res.Reason)
				}
				if !res.Result && res.Reason == "" {
					t.Errorf("%s: failed without a reason", k)
				}
				if strings.Contains(res.Reason, "s3cret") {
					t.Errorf("%s: reason %q carries a secret", k, res.Reason)
				}
			}
			for k, sub := range r.reason {
				if !strings.Contains(got[k].Reason, sub) {
					t.Errorf("%s: reason %q, want it to contain %q", k, got[k].Reason, sub)
				}
			}
		})
	}
}

func TestBootDevice(t *testing.T) {
	t.Parallel()
	h := syncHarness(t, nil, conductor.Options{})
	set := func(dev driver.BootDevice, persistent bool) func(*testing.T, string, *baremetal.Node) error {
		return func(t *testing.T, ident string, n *baremetal.Node) error {
			if err := h.c.SetBootDevice(h.ctx, ident, dev, persistent); err != nil {
				return err
			}
			got, err := h.c.GetBootDevice(h.ctx, ident)
			if err != nil {
				return err
			}
			if got.Device != dev || got.Persistent == nil || *got.Persistent != persistent {
				t.Errorf("boot device after set: %+v, want %s persistent %v", got, dev, persistent)
			}
			stored, _ := h.store.GetNode(h.ctx, n.UUID)
			if stored.DriverInternalInfo[fake.BootDeviceKey] != string(dev) {
				t.Errorf("the fake's record was not saved: %v", stored.DriverInternalInfo)
			}
			return nil
		}
	}
	runSyncRows(t, h, []syncRow{
		{name: "set disk persistent", wantErr: nil},
	}, set(driver.BootDisk, true))
	runSyncRows(t, h, []syncRow{
		{name: "set pxe once"},
		{name: "locked", locked: true, wantErr: baremetal.ErrNodeLocked},
		{name: "unknown node", unknown: true, wantErr: baremetal.ErrNotFound},
		{name: "management validation fails", edit: func(n *baremetal.Node) { n.DriverInfo = map[string]any{fake.DelayKey: "soon"} },
			wantErr: driver.ErrInvalidParameter, wantIn: "%s"},
		{name: "driver fails", edit: func(n *baremetal.Node) { n.DriverInfo = map[string]any{fake.FailKey: "management.set_boot_device"} },
			wantErr: driver.ErrInjectedFailure, wantIn: "%s"},
	}, set(driver.BootPXE, false))
	runSyncRows(t, h, []syncRow{
		{name: "unsupported device", wantErr: driver.ErrInvalidParameter, wantIn: "boot_device"},
	}, func(_ *testing.T, ident string, _ *baremetal.Node) error {
		return h.c.SetBootDevice(h.ctx, ident, "floppy", false)
	})
	runSyncRows(t, h, []syncRow{
		{name: "empty device", wantErr: baremetal.ErrInvalidInput, wantIn: "boot_device"},
	}, func(_ *testing.T, ident string, _ *baremetal.Node) error {
		return h.c.SetBootDevice(h.ctx, ident, "", false)
	})
	runSyncRows(t, h, []syncRow{
		{name: "get default"},
		{name: "get locked", locked: true, wantErr: baremetal.ErrNodeLocked},
		{name: "get plain management", edit: func(n *baremetal.Node) { n.ManagementInterface = "plain" }},
	}, func(t *testing.T, ident string, _ *baremetal.Node) error {
		got, err := h.c.GetBootDevice(h.ctx, ident)
		if err == nil && got.Device != driver.BootPXE {
			t.Errorf("boot device %+v, want pxe", got)
		}
		return err
	})
	runSyncRows(t, h, []syncRow{
		{name: "supported"},
		// Ironic reads the supported devices under a shared lock.
		{name: "supported on a locked node", locked: true, wantErr: nil},
		{name: "supported unknown", unknown: true, wantErr: baremetal.ErrNotFound},
	}, func(t *testing.T, ident string, n *baremetal.Node) error {
		got, err := h.c.SupportedBootDevices(h.ctx, ident)
		if err == nil && fmt.Sprint(got) != "[pxe disk cdrom bios safe]" {
			t.Errorf("supported %v", got)
		}
		return err
	})
}

// TestSyncPanicReleases: a driver that panics under a synchronous
// operation leaves the node unreserved.
func TestSyncPanicReleases(t *testing.T) {
	t.Parallel()
	h := syncHarness(t, nil, conductor.Options{})
	n := h.syncNode(func(n *baremetal.Node) {
		n.ManagementInterface = "plain"
		n.DriverInfo = map[string]any{"panic": true}
	})
	func() {
		defer func() {
			if r := recover(); r == nil {
				t.Error("the driver's panic did not reach the caller")
			}
		}()
		_, _ = h.c.GetBootDevice(h.ctx, n.UUID)
	}()
	h.wantReservation(n.UUID, "")
}

func TestInjectNMI(t *testing.T) {
	t.Parallel()
	h := syncHarness(t, nil, conductor.Options{})
	runSyncRows(t, h, []syncRow{
		{name: "fake"},
		{name: "no capability", edit: func(n *baremetal.Node) { n.ManagementInterface = "plain" }, wantErr: driver.ErrUnsupported, wantIn: "%s"},
		{name: "locked", locked: true, wantErr: baremetal.ErrNodeLocked},
		{name: "unknown node", unknown: true, wantErr: baremetal.ErrNotFound},
		{name: "driver fails", edit: func(n *baremetal.Node) { n.DriverInfo = map[string]any{fake.FailKey: "management.inject_nmi"} },
			wantErr: driver.ErrInjectedFailure},
	}, func(t *testing.T, ident string, n *baremetal.Node) error {
		err := h.c.InjectNMI(h.ctx, ident)
		if err == nil {
			stored, _ := h.store.GetNode(h.ctx, n.UUID)
			if stored.DriverInternalInfo[fake.NMICountKey] != float64(1) {
				t.Errorf("nmi count %v, want 1 saved", stored.DriverInternalInfo[fake.NMICountKey])
			}
		}
		return err
	})
}

func TestSetTargetRAIDConfig(t *testing.T) {
	t.Parallel()
	h := syncHarness(t, nil, conductor.Options{})
	good := map[string]any{"logical_disks": []any{map[string]any{"size_gb": float64(100), "raid_level": "1", "is_root_volume": true}}}
	type row struct {
		syncRow
		before map[string]any // target_raid_config before
		cfg    map[string]any
		want   map[string]any // target_raid_config after
	}
	rows := []row{
		{syncRow: syncRow{name: "store"}, cfg: good, want: good},
		{syncRow: syncRow{name: "empty clears"}, before: good, cfg: map[string]any{}, want: nil},
		{syncRow: syncRow{name: "nil clears"}, before: good, want: nil},
		{syncRow: syncRow{name: "refused by the raid interface", wantErr: driver.ErrInvalidParameter, wantIn: "logical_disks"},
			before: good, cfg: map[string]any{"logical_disks": []any{}}, want: good},
		{syncRow: syncRow{name: "no-raid", edit: func(n *baremetal.Node) { n.RAIDInterface = driver.NoRAID }, wantErr: driver.ErrUnsupported, wantIn: "%s"},
			cfg: good, want: nil},
		{syncRow: syncRow{name: "no-raid clears", edit: func(n *baremetal.Node) { n.RAIDInterface = driver.NoRAID }}, before: good, cfg: map[string]any{}, want: nil},
		{syncRow: syncRow{name: "locked", locked: true, wantErr: baremetal.ErrNodeLocked}, before: good, cfg: map[string]any{}, want: good},
		{syncRow: syncRow{name: "unknown node", unknown: true, wantErr: baremetal.ErrNotFound}, cfg: good},
	}
	for _, r := range rows {
		edit := r.edit
		r.edit = func(n *baremetal.Node) {
			if edit != nil {
				edit(n)
			}
			n.TargetRAIDConfig = r.before
		}
		runSyncRows(t, h, []syncRow{r.syncRow}, func(t *testing.T, ident string, n *baremetal.Node) error {
			err := h.c.SetTargetRAIDConfig(h.ctx, ident, r.cfg)
			stored, _ := h.store.GetNode(h.ctx, n.UUID)
			if fmt.Sprint(stored.TargetRAIDConfig) != fmt.Sprint(r.want) && !r.unknown {
				t.Errorf("target_raid_config %v, want %v", stored.TargetRAIDConfig, r.want)
			}
			return err
		})
	}
}

func TestBIOSAndFirmware(t *testing.T) {
	t.Parallel()
	h := syncHarness(t, nil, conductor.Options{})
	runSyncRows(t, h, []syncRow{
		{name: "bios"},
		{name: "bios on a locked node", locked: true},
		{name: "no-bios", edit: func(n *baremetal.Node) { n.BIOSInterface = driver.NoBIOS }, wantErr: driver.ErrUnsupported, wantIn: "%s"},
		{name: "bios fails", edit: func(n *baremetal.Node) { n.DriverInfo = map[string]any{fake.FailKey: "bios.cache_bios_settings"} },
			wantErr: driver.ErrInjectedFailure},
		{name: "bios unknown", unknown: true, wantErr: baremetal.ErrNotFound},
	}, func(t *testing.T, ident string, _ *baremetal.Node) error {
		got, err := h.c.BIOSSettings(h.ctx, ident)
		if err == nil && (len(got) != 2 || got[0].Name != "BootMode" || got[0].Value != "Uefi") {
			t.Errorf("bios settings %+v", got)
		}
		return err
	})
	runSyncRows(t, h, []syncRow{
		{name: "firmware"},
		{name: "no-firmware", edit: func(n *baremetal.Node) { n.FirmwareInterface = driver.NoFirmware }, wantErr: driver.ErrUnsupported, wantIn: "%s"},
		{name: "firmware unknown", unknown: true, wantErr: baremetal.ErrNotFound},
	}, func(t *testing.T, ident string, _ *baremetal.Node) error {
		got, err := h.c.FirmwareComponents(h.ctx, ident)
		if err == nil && (len(got) != 2 || got[0].Component != "bios" || got[0].CurrentVersion != "1.0.0") {
			t.Errorf("firmware %+v", got)
		}
		return err
	})
}

func TestVendorPassthru(t *testing.T) {
	t.Parallel()
	rec := &vendorRec{}
	h := syncHarness(t, rec, conductor.Options{})
	mockVendor := func(n *baremetal.Node) { n.VendorInterface = "mock" }
	type row struct {
		syncRow
		method, verb string
		args         map[string]any
		want         string // fmt.Sprint of the result
		async        bool
	}
	rows := []row{
		{syncRow: syncRow{name: "echo"}, method: "echo", verb: "get", args: map[string]any{"a": "b"}, want: "map[a:b]"},
		{syncRow: syncRow{name: "first_method"}, method: "first_method", verb: "POST", args: map[string]any{"bar": "baz"}, want: "map[bar:baz]"},
		{syncRow: syncRow{name: "missing argument", wantErr: driver.ErrMissingParameter, wantIn: "bar"}, method: "first_method", verb: "POST"},
		{syncRow: syncRow{name: "wrong verb", wantErr: driver.ErrInvalidParameter, wantIn: "does not support HTTP GET"}, method: "first_method", verb: "GET"},
		{syncRow: syncRow{name: "unknown method", wantErr: driver.ErrInvalidParameter, wantIn: "no handler for method nope"}, method: "nope", verb: "POST"},
		{syncRow: syncRow{name: "no-vendor", edit: func(n *baremetal.Node) { n.VendorInterface = driver.NoVendor }, wantErr: driver.ErrInvalidParameter}, method: "echo", verb: "GET"},
		{syncRow: syncRow{name: "empty method", wantErr: baremetal.ErrInvalidInput, wantIn: "method"}, verb: "GET"},
		{syncRow: syncRow{name: "locked", locked: true, wantErr: baremetal.ErrNodeLocked}, method: "echo", verb: "GET"},
		{syncRow: syncRow{name: "unknown node", unknown: true, wantErr: baremetal.ErrNotFound}, method: "echo", verb: "GET"},
		{syncRow: syncRow{name: "driver fails", edit: func(n *baremetal.Node) { n.DriverInfo = map[string]any{fake.FailKey: "vendor.echo"} },
			wantErr: driver.ErrInjectedFailure}, method: "echo", verb: "GET"},
		{syncRow: syncRow{name: "mock sync", edit: mockVendor}, method: "status", verb: "GET", want: "map[ok:true]"},
	}
	for _, r := range rows {
		runSyncRows(t, h, []syncRow{r.syncRow}, func(t *testing.T, ident string, _ *baremetal.Node) error {
			res, async, err := h.c.VendorPassthru(h.ctx, ident, r.method, r.verb, r.args)
			if err == nil && (fmt.Sprint(res) != r.want || async != r.async) {
				t.Errorf("result %v async %v, want %s async %v", res, async, r.want, r.async)
			}
			return err
		})
	}
	t.Run("unknown method on a locked node fails at once", func(t *testing.T) {
		n := h.syncNode(nil)
		h.lockBy(n.UUID, "other-conductor")
		if _, _, err := h.c.VendorPassthru(h.ctx, n.UUID, "nope", "POST", nil); !errors.Is(err, driver.ErrInvalidParameter) {
			t.Errorf("error %v, want the unknown method before the lock", err)
		}
		h.wantReservation(n.UUID, "other-conductor")
	})
	t.Run("methods", func(t *testing.T) {
		for _, c := range []struct {
			vendor string
			want   string
		}{{fake.Name, "[first_method echo]"}, {driver.NoVendor, "[]"}, {"mock", "[reset status]"}} {
			n := h.syncNode(func(n *baremetal.Node) { n.VendorInterface = c.vendor })
			h.lockBy(n.UUID, "other-conductor") // a shared read: the lock does not matter
			ms, err := h.c.VendorMethods(h.ctx, n.UUID)
			var names []string
			for _, m := range ms {
				names = append(names, m.Name)
			}
			if err != nil || fmt.Sprint(names) != c.want {
				t.Errorf("%s: methods %v %v, want %s", c.vendor, names, err, c.want)
			}
		}
		if _, err := h.c.VendorMethods(h.ctx, "no-such-node"); !errors.Is(err, baremetal.ErrNotFound) {
			t.Errorf("unknown node: %v", err)
		}
	})
	t.Run("async", func(t *testing.T) {
		for _, fail := range []error{nil, errors.New("BMC reset refused")} {
			done := make(chan struct{})
			rec.mu.Lock()
			rec.fail, rec.done, rec.release = fail, done, nil
			rec.mu.Unlock()
			n := h.syncNode(mockVendor)
			res, async, err := h.c.VendorPassthru(h.ctx, n.UUID, "reset", "post", nil)
			if err != nil || !async || res != nil {
				t.Fatalf("async call: %v %v %v", res, async, err)
			}
			<-done
			deadline := time.Now().Add(5 * time.Second)
			for {
				got, _ := h.store.GetNode(h.ctx, n.UUID)
				if got.Reservation == "" {
					if got.DriverInternalInfo["mock_reset"] != true {
						t.Errorf("the method's change was not saved: %v", got.DriverInternalInfo)
					}
					if fail == nil && got.LastError != "" || fail != nil && !strings.Contains(got.LastError, "BMC reset refused") {
						t.Errorf("fail %v: last_error %q", fail, got.LastError)
					}
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("node still reserved by %q after the async method", got.Reservation)
				}
				time.Sleep(2 * time.Millisecond)
			}
		}
	})
}

// TestVendorPassthruNoFreeWorker: with the only worker busy with an
// asynchronous method, the next one is refused with ErrNoFreeWorker and
// leaves its node unreserved.
func TestVendorPassthruNoFreeWorker(t *testing.T) {
	t.Parallel()
	rec := &vendorRec{release: make(chan struct{})}
	h := syncHarness(t, rec, conductor.Options{Workers: 1})
	busy := h.syncNode(func(n *baremetal.Node) { n.VendorInterface = "mock" })
	if _, async, err := h.c.VendorPassthru(h.ctx, busy.UUID, "reset", "POST", nil); err != nil || !async {
		t.Fatalf("first async call: %v %v", async, err)
	}
	second := h.syncNode(func(n *baremetal.Node) { n.VendorInterface = "mock" })
	_, _, err := h.c.VendorPassthru(h.ctx, second.UUID, "reset", "POST", nil)
	var nf *conductor.NoFreeWorkerError
	if !errors.Is(err, conductor.ErrNoFreeWorker) || !errors.As(err, &nf) || nf.Node != second.UUID {
		t.Errorf("second async call: %v, want a NoFreeWorkerError naming %s", err, second.UUID)
	}
	h.wantReservation(second.UUID, "")
	h.wantReservation(busy.UUID, h.c.Hostname())
	close(rec.release)
}

func TestVirtualMedia(t *testing.T) {
	t.Parallel()
	h := syncHarness(t, nil, conductor.Options{})
	plain := func(n *baremetal.Node) { n.ManagementInterface = "plain" }
	const iso = "http://192.0.2.10/boot.iso"
	attach := func(dev, url string, o conductor.VirtualMediaOptions) func(*testing.T, string, *baremetal.Node) error {
		return func(t *testing.T, ident string, n *baremetal.Node) error {
			err := h.c.AttachVirtualMedia(h.ctx, ident, dev, url, o)
			if err != nil {
				if strings.Contains(err.Error(), "hunter2") {
					t.Errorf("error %q carries the URL's password", err)
				}
				return err
			}
			// Attached by a worker holding the reservation, as Ironic's
			// conductor does after answering: wait for its release.
			after := waitReleased(t, h, ident)
			if _, fails := n.DriverInfo[fake.FailKey]; fails {
				if !strings.Contains(after.LastError, "Could not attach device cdrom to node "+ident) || !strings.Contains(after.LastError, "injected") {
					t.Errorf("last_error after a failed attach: %q", after.LastError)
				}
				return nil
			}
			st, err := h.c.VirtualMediaState(h.ctx, ident)
			if err != nil {
				return err
			}
			if fmt.Sprint(st[0]) != fmt.Sprint(driver.VirtualMedia{MediaTypes: []string{"CD", "DVD"}, Inserted: true, Image: url}) {
				t.Errorf("virtual media after attach: %+v", st)
			}
			return nil
		}
	}
	runSyncRows(t, h, []syncRow{
		{name: "attach cdrom"},
		{name: "locked", locked: true, wantErr: baremetal.ErrNodeLocked},
		{name: "unknown node", unknown: true, wantErr: baremetal.ErrNotFound},
		{name: "no capability", edit: plain, wantErr: driver.ErrUnsupported, wantIn: "%s"},
		{name: "power failure", edit: func(n *baremetal.Node) { n.Maintenance, n.Fault = true, "power failure" }, wantErr: conductor.ErrVerbRefused},
		// The driver's failure comes after the answer: in last_error.
		{name: "driver fails", edit: func(n *baremetal.Node) {
			n.DriverInfo = map[string]any{fake.FailKey: "management.attach_virtual_media"}
		}},
	}, attach("cdrom", iso, conductor.VirtualMediaOptions{}))
	for _, c := range []struct {
		name, dev, url, source, field string
	}{
		{"bad device", "tape", iso, "", "device_type"},
		{"bad scheme", "cdrom", "ftp://192.0.2.10/boot.iso", "", "image_url"},
		{"relative url", "cdrom", "/boot.iso", "", "image_url"},
		{"password in url", "cdrom", "http://user:hunter2@192.0.2.10/boot.iso", "", "image_url"},
		{"local nfs", "cdrom", "nfs://192.0.2.10/export/boot.iso", "local", "image_download_source"},
		{"bad source", "cdrom", iso, "glance", "image_download_source"},
	} {
		runSyncRows(t, h, []syncRow{{name: c.name, wantErr: baremetal.ErrInvalidInput, wantIn: c.field}},
			attach(c.dev, c.url, conductor.VirtualMediaOptions{DownloadSource: c.source}))
	}
	runSyncRows(t, h, []syncRow{{name: "http nfs"}}, attach("cdrom", "nfs://192.0.2.10/export/boot.iso", conductor.VirtualMediaOptions{DownloadSource: "http"}))

	detach := func(devs []string, left int) func(*testing.T, string, *baremetal.Node) error {
		return func(t *testing.T, ident string, n *baremetal.Node) error {
			if n.UUID == ident {
				if err := h.c.AttachVirtualMedia(h.ctx, ident, "cdrom", iso, conductor.VirtualMediaOptions{}); err != nil && !errors.Is(err, driver.ErrUnsupported) {
					t.Fatal(err)
				}
				waitReleased(t, h, ident)
				if err := h.c.AttachVirtualMedia(h.ctx, ident, "disk", iso, conductor.VirtualMediaOptions{}); err != nil && !errors.Is(err, driver.ErrUnsupported) {
					t.Fatal(err)
				}
				waitReleased(t, h, ident)
			}
			if err := h.c.DetachVirtualMedia(h.ctx, ident, devs); err != nil {
				return err
			}
			st, err := h.c.VirtualMediaState(h.ctx, ident)
			if err != nil {
				return err
			}
			inserted := 0
			for _, d := range st {
				if d.Inserted {
					inserted++
				}
			}
			if inserted != left {
				t.Errorf("detach %v: %d devices hold an image, want %d (%+v)", devs, inserted, left, st)
			}
			return nil
		}
	}
	runSyncRows(t, h, []syncRow{{name: "detach cdrom"}}, detach([]string{"cdrom"}, 1))
	runSyncRows(t, h, []syncRow{{name: "detach cdrom twice"}}, detach([]string{"cdrom", "cdrom"}, 1))
	runSyncRows(t, h, []syncRow{{name: "detach all"}}, detach(nil, 0))
	runSyncRows(t, h, []syncRow{{name: "detach bad device", wantErr: baremetal.ErrInvalidInput, wantIn: "device_types"}}, detach([]string{"cdrom", "tape"}, 0))
	runSyncRows(t, h, []syncRow{{name: "detach no capability", edit: plain, wantErr: driver.ErrUnsupported}}, detach([]string{"cdrom"}, 0))
	runSyncRows(t, h, []syncRow{
		{name: "state on a locked node", locked: true},
		{name: "state no capability", edit: plain, wantErr: driver.ErrUnsupported},
		{name: "state unknown", unknown: true, wantErr: baremetal.ErrNotFound},
	}, func(t *testing.T, ident string, _ *baremetal.Node) error {
		st, err := h.c.VirtualMediaState(h.ctx, ident)
		if err == nil && len(st) != 3 {
			t.Errorf("state %+v", st)
		}
		return err
	})
}

// TestSyncOpsNotRunning: before Launch every synchronous operation fails
// with ErrConductorNotRunning.
func TestSyncOpsNotRunning(t *testing.T) {
	t.Parallel()
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}})
	reg.MustRegister(builtin.Bundle(fake.Config{}))
	c, err := conductor.New(openStore(t, false), reg, conductor.Options{Hostname: "not-running"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	calls := map[string]func() error{
		"Validate":             func() error { _, err := c.Validate(ctx, "n"); return err },
		"GetBootDevice":        func() error { _, err := c.GetBootDevice(ctx, "n"); return err },
		"SetBootDevice":        func() error { return c.SetBootDevice(ctx, "n", driver.BootPXE, false) },
		"SupportedBootDevices": func() error { _, err := c.SupportedBootDevices(ctx, "n"); return err },
		"InjectNMI":            func() error { return c.InjectNMI(ctx, "n") },
		"SetTargetRAIDConfig":  func() error { return c.SetTargetRAIDConfig(ctx, "n", nil) },
		"BIOSSettings":         func() error { _, err := c.BIOSSettings(ctx, "n"); return err },
		"FirmwareComponents":   func() error { _, err := c.FirmwareComponents(ctx, "n"); return err },
		"VendorMethods":        func() error { _, err := c.VendorMethods(ctx, "n"); return err },
		"VendorPassthru":       func() error { _, _, err := c.VendorPassthru(ctx, "n", "echo", "GET", nil); return err },
		"AttachVirtualMedia": func() error {
			return c.AttachVirtualMedia(ctx, "n", "cdrom", "http://192.0.2.1/a.iso", conductor.VirtualMediaOptions{})
		},
		"DetachVirtualMedia": func() error { return c.DetachVirtualMedia(ctx, "n", nil) },
		"VirtualMediaState":  func() error { _, err := c.VirtualMediaState(ctx, "n"); return err },
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, conductor.ErrConductorNotRunning) {
			t.Errorf("%s: %v, want ErrConductorNotRunning", name, err)
		}
	}
}

// waitReleased waits until node ident has no reservation (a worker's
// background work on it is done) and returns it.
func waitReleased(t *testing.T, h *harness, ident string) *baremetal.Node {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := h.c.Store().GetNode(h.ctx, ident)
		if err != nil {
			t.Fatal(err)
		}
		if n.Reservation == "" {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s still reserved by %q", ident, n.Reservation)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
