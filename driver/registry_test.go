package driver_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/driver/noop"
)

// otherPower is a second power implementation registered under another
// name, to exercise overrides and compatibility.
type otherPower struct{ *fake.Power }

func newRegistry(t *testing.T, cfg driver.Config) *driver.Registry {
	t.Helper()
	reg := driver.NewRegistry(cfg)
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		t.Fatalf("Register builtins: %v", err)
	}
	if err := reg.RegisterInterface(driver.KindPower, "other", otherPower{fake.NewPower(fake.Config{})}); err != nil {
		t.Fatalf("RegisterInterface: %v", err)
	}
	return reg
}

func TestResolveRules(t *testing.T) {
	fakeOnly := driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}}
	both := driver.Config{
		EnabledHardwareTypes: []string{builtin.FakeHardware, builtin.ManualManagement},
		EnabledInterfaces: map[driver.Kind][]string{
			driver.KindPower:      {fake.Name, "other"},
			driver.KindManagement: {fake.Name, driver.Noop},
			driver.KindDeploy:     {fake.Name, driver.Noop},
			driver.KindBoot:       {fake.Name},
		},
	}
	tests := []struct {
		name      string
		cfg       driver.Config
		node      driver.NodeInterfaces
		wantIs    error
		wantText  []string // fragments the error message must contain
		wantNames map[driver.Kind]string
		check     func(t *testing.T, err error)
	}{
		{
			name:      "defaults for fake-hardware",
			cfg:       fakeOnly,
			node:      driver.NodeInterfaces{HardwareType: builtin.FakeHardware},
			wantNames: map[driver.Kind]string{driver.KindPower: fake.Name, driver.KindNetwork: driver.Noop, driver.KindStorage: driver.Noop, driver.KindBIOS: fake.Name},
		},
		{
			name:     "unknown hardware type",
			cfg:      fakeOnly,
			node:     driver.NodeInterfaces{HardwareType: "idrac"},
			wantIs:   driver.ErrHardwareTypeNotFound,
			wantText: []string{`"idrac" not found`, `"fake-hardware"`},
		},
		{
			name:     "registered but disabled hardware type",
			cfg:      fakeOnly,
			node:     driver.NodeInterfaces{HardwareType: builtin.ManualManagement},
			wantIs:   driver.ErrHardwareTypeNotFound,
			wantText: []string{"registered but not enabled"},
			check: func(t *testing.T, err error) {
				var e *driver.HardwareTypeNotFoundError
				if !errors.As(err, &e) || !e.Registered {
					t.Errorf("want *HardwareTypeNotFoundError with Registered, got %#v", err)
				}
			},
		},
		{
			name:     "unknown implementation lists valid names",
			cfg:      both,
			node:     driver.NodeInterfaces{Node: "n1", HardwareType: builtin.FakeHardware, Interfaces: map[driver.Kind]string{driver.KindPower: "ipmitool"}},
			wantIs:   driver.ErrInterfaceNotFound,
			wantText: []string{`power interface "ipmitool" not found`, `"fake", "other"`, "node n1"},
			check: func(t *testing.T, err error) {
				var e *driver.InterfaceNotFoundError
				if !errors.As(err, &e) || e.Kind != driver.KindPower || !slices.Equal(e.Valid, []string{"fake", "other"}) {
					t.Errorf("want InterfaceNotFoundError{power, valid [fake other]}, got %#v", e)
				}
			},
		},
		{
			name:     "registered but not enabled implementation",
			cfg:      fakeOnly,
			node:     driver.NodeInterfaces{HardwareType: builtin.FakeHardware, Interfaces: map[driver.Kind]string{driver.KindPower: "other"}},
			wantIs:   driver.ErrInterfaceNotFound,
			wantText: []string{"registered but not enabled"},
		},
		{
			name:     "incompatible implementation",
			cfg:      both,
			node:     driver.NodeInterfaces{HardwareType: builtin.ManualManagement, Interfaces: map[driver.Kind]string{driver.KindPower: "other", driver.KindBoot: fake.Name}},
			wantIs:   driver.ErrIncompatibleInterface,
			wantText: []string{`power interface "other" is not supported by hardware type "manual-management"`, `"agent", "fake"`},
			check: func(t *testing.T, err error) {
				// Both the power and the boot choice are wrong: both are reported.
				if n := strings.Count(err.Error(), "is not supported by"); n != 2 {
					t.Errorf("want both kinds reported, got %d in %v", n, err)
				}
			},
		},
		{
			name:     "no valid default says what to enable",
			cfg:      both,
			node:     driver.NodeInterfaces{Node: "n2", HardwareType: builtin.ManualManagement},
			wantIs:   driver.ErrNoValidDefault,
			wantText: []string{"no default boot interface", `enable one of "ipxe", "pxe", "http-ipxe", "http"`, "node n2"},
			check: func(t *testing.T, err error) {
				var e *driver.NoValidDefaultError
				if !errors.As(err, &e) || e.Kind != driver.KindBoot || e.HardwareType != builtin.ManualManagement {
					t.Errorf("want NoValidDefaultError for boot, got %#v", e)
				}
			},
		},
		{
			name:      "instance_info overrides the node field",
			cfg:       both,
			node:      driver.NodeInterfaces{HardwareType: builtin.FakeHardware, Interfaces: map[driver.Kind]string{driver.KindPower: fake.Name}, InstanceInfo: map[string]any{"power_interface": "other"}},
			wantNames: map[driver.Kind]string{driver.KindPower: "other"},
		},
		{
			name:     "bad instance_info override names the key",
			cfg:      both,
			node:     driver.NodeInterfaces{HardwareType: builtin.FakeHardware, InstanceInfo: map[string]any{"deploy_interface": "direct"}},
			wantIs:   driver.ErrInterfaceNotFound,
			wantText: []string{`instance_info["deploy_interface"]`, `"direct" not found`},
		},
		{
			name:      "fake-hardware skips compatibility checks",
			cfg:       both,
			node:      driver.NodeInterfaces{HardwareType: builtin.FakeHardware, Interfaces: map[driver.Kind]string{driver.KindManagement: driver.Noop, driver.KindDeploy: driver.Noop, driver.KindPower: "other"}},
			wantNames: map[driver.Kind]string{driver.KindManagement: driver.Noop, driver.KindDeploy: driver.Noop, driver.KindPower: "other"},
		},
		{
			name: "configured default must be compatible",
			cfg: driver.Config{
				EnabledHardwareTypes: []string{builtin.ManualManagement},
				EnabledInterfaces:    map[driver.Kind][]string{driver.KindPower: {fake.Name, "other"}, driver.KindBoot: {fake.Name}},
				DefaultInterfaces:    map[driver.Kind]string{driver.KindPower: "other"},
			},
			node:     driver.NodeInterfaces{HardwareType: builtin.ManualManagement, Interfaces: map[driver.Kind]string{driver.KindBoot: fake.Name}},
			wantIs:   driver.ErrIncompatibleInterface,
			wantText: []string{`configured default "other" is unusable`},
			check: func(t *testing.T, err error) {
				if !errors.Is(err, driver.ErrNoValidDefault) {
					t.Errorf("want ErrNoValidDefault too, got %v", err)
				}
			},
		},
		{
			name: "configured default wins over supported order",
			cfg: driver.Config{
				EnabledHardwareTypes: []string{builtin.FakeHardware},
				EnabledInterfaces:    map[driver.Kind][]string{driver.KindNetwork: {driver.Noop, fake.Name}},
				DefaultInterfaces:    map[driver.Kind]string{driver.KindNetwork: fake.Name},
			},
			node:      driver.NodeInterfaces{HardwareType: builtin.FakeHardware},
			wantNames: map[driver.Kind]string{driver.KindNetwork: fake.Name},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			reg := newRegistry(t, tc.cfg)
			drv, err := reg.Resolve(tc.node)
			if tc.wantIs != nil {
				if !errors.Is(err, tc.wantIs) {
					t.Fatalf("Resolve error = %v, want errors.Is %v", err, tc.wantIs)
				}
				for _, frag := range tc.wantText {
					if !strings.Contains(err.Error(), frag) {
						t.Errorf("error %q lacks %q", err, frag)
					}
				}
				if tc.check != nil {
					tc.check(t, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve: %v", err)
			}
			if len(drv.Names) != 13 {
				t.Errorf("resolved %d kinds, want 13: %v", len(drv.Names), drv.Names)
			}
			for k, want := range tc.wantNames {
				if got := drv.Names[k]; got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
				if drv.Interface(k) == nil {
					t.Errorf("%s has no implementation", k)
				}
			}
		})
	}
}

func TestEnabledComputedFromHardwareTypes(t *testing.T) {
	reg := newRegistry(t, driver.Config{
		EnabledHardwareTypes: []string{builtin.FakeHardware, builtin.ManualManagement},
		EnabledInterfaces:    map[driver.Kind][]string{driver.KindPower: {"other", "other", ""}},
	})
	e := reg.Enabled()
	cases := map[driver.Kind][]string{
		driver.KindPower:      {"other"},                // configured, de-duplicated, empty entries dropped
		driver.KindManagement: {fake.Name, driver.Noop}, // first of each enabled type
		driver.KindBoot:       {fake.Name},              // manual-management's ipxe is not registered
		driver.KindRAID:       {fake.Name, driver.NoRAID},
		driver.KindStorage:    {driver.Noop},
	}
	for k, want := range cases {
		if got := e.Interfaces[k]; !slices.Equal(got, want) {
			t.Errorf("enabled %s = %v, want %v", k, got, want)
		}
	}
}

func TestFillDefaults(t *testing.T) {
	reg := newRegistry(t, driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}})
	got, err := reg.FillDefaults(driver.NodeInterfaces{HardwareType: builtin.FakeHardware, Interfaces: map[driver.Kind]string{driver.KindNetwork: driver.Noop}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 13 || got[driver.KindPower] != fake.Name || got[driver.KindNetwork] != driver.Noop {
		t.Errorf("FillDefaults = %v", got)
	}
	_, err = reg.FillDefaults(driver.NodeInterfaces{HardwareType: builtin.FakeHardware, InstanceInfo: map[string]any{"raid_interface": "agent"}})
	if !errors.Is(err, driver.ErrInterfaceNotFound) || !strings.Contains(err.Error(), "raid_interface") {
		t.Errorf("bad override error = %v", err)
	}
}

func TestCheck(t *testing.T) {
	if err := newRegistry(t, driver.Config{}).Check(); !errors.Is(err, driver.ErrNoHardwareTypes) {
		t.Errorf("no hardware types: %v", err)
	}
	err := newRegistry(t, driver.Config{
		EnabledHardwareTypes: []string{builtin.FakeHardware, "redfish"},
		EnabledInterfaces:    map[driver.Kind][]string{driver.KindPower: {fake.Name, "ipmitool"}},
		DefaultInterfaces:    map[driver.Kind]string{driver.KindBoot: "ipxe"},
	}).Check()
	var hw *driver.HardwareTypeNotFoundError
	var nf *driver.InterfaceNotFoundError
	if !errors.As(err, &hw) || hw.Name != "redfish" {
		t.Errorf("want redfish not found in %v", err)
	}
	if !errors.As(err, &nf) || nf.Name != "ipmitool" || !slices.Contains(nf.Valid, "other") {
		t.Errorf("want ipmitool not found listing registered names in %v", err)
	}
	if !errors.Is(err, driver.ErrInvalidParameter) || !strings.Contains(err.Error(), `default boot interface "ipxe" is not enabled`) {
		t.Errorf("want default not enabled in %v", err)
	}
	if err := newRegistry(t, driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}}).Check(); err != nil {
		t.Errorf("valid config: %v", err)
	}
	// Ironic's cinder storage interface needs a Block Storage service
	// Anvil has no client for: enabling it says so.
	err = newRegistry(t, driver.Config{
		EnabledHardwareTypes: []string{builtin.FakeHardware},
		EnabledInterfaces:    map[driver.Kind][]string{driver.KindStorage: {driver.Noop, "cinder"}},
	}).Check()
	if !errors.As(err, &nf) || nf.Kind != driver.KindStorage || nf.Name != "cinder" || !strings.Contains(err.Error(), "Block Storage service (Cinder)") {
		t.Errorf("want cinder refused with its reason, got %v", err)
	}
}

func TestRegistrationErrors(t *testing.T) {
	reg := newRegistry(t, driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}})
	if err := reg.RegisterInterface(driver.KindPower, fake.Name, fake.NewPower(fake.Config{})); !errors.Is(err, driver.ErrDuplicate) {
		t.Errorf("duplicate: %v", err)
	}
	if err := reg.RegisterInterface(driver.KindPower, "boot-as-power", fake.NewBoot(fake.Config{})); !errors.Is(err, driver.ErrInvalidParameter) {
		t.Errorf("wrong kind: %v", err)
	}
	if err := reg.RegisterInterface("bogus", "x", noop.Network{}); !errors.Is(err, driver.ErrInvalidParameter) {
		t.Errorf("bogus kind: %v", err)
	}
	if err := reg.RegisterHardwareType(driver.HardwareType{Name: "half", Supported: map[driver.Kind][]string{driver.KindPower: {"x"}}}); !errors.Is(err, driver.ErrInvalidParameter) || !strings.Contains(err.Error(), "boot") {
		t.Errorf("missing core kinds: %v", err)
	}
	if err := reg.RegisterHardwareType(builtin.FakeHardwareType()); !errors.Is(err, driver.ErrDuplicate) {
		t.Errorf("duplicate hardware type: %v", err)
	}
	if src, _ := reg.Source(driver.KindPower, "other"); src != "builtin" {
		t.Errorf("source = %q", src)
	}
}

// TestRegistryConcurrentUse registers implementations (as a plugin host
// does after start) while nodes are resolved; run with -race.
func TestRegistryConcurrentUse(t *testing.T) {
	reg := newRegistry(t, driver.Config{
		EnabledHardwareTypes: []string{builtin.FakeHardware},
		EnabledInterfaces:    map[driver.Kind][]string{driver.KindPower: {fake.Name, "p0", "p1", "p2", "p3"}},
	})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 4 {
			if err := reg.RegisterInterface(driver.KindPower, fmt.Sprintf("p%d", i), fake.NewPower(fake.Config{})); err != nil {
				t.Error(err)
			}
		}
	}()
	for range 200 {
		if _, err := reg.Resolve(driver.NodeInterfaces{HardwareType: builtin.FakeHardware}); err != nil {
			t.Fatal(err)
		}
	}
	<-done
	drv, err := reg.Resolve(driver.NodeInterfaces{HardwareType: builtin.FakeHardware, Interfaces: map[driver.Kind]string{driver.KindPower: "p3"}})
	if err != nil || drv.Names[driver.KindPower] != "p3" {
		t.Errorf("resolve p3 = %v, %v", drv, err)
	}
}

// mustPanic runs f and returns the error it panicked with.
func mustPanic(t *testing.T, f func()) (err error) {
	t.Helper()
	defer func() {
		r := recover()
		if r == nil {
			t.Fatal("no panic")
		}
		var ok bool
		if err, ok = r.(error); !ok {
			t.Fatalf("panicked with %T %v, want an error", r, r)
		}
	}()
	f()
	return nil
}

func TestMustRegisterPanicsOnMistakes(t *testing.T) {
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}})
	reg.MustRegister(builtin.Bundle(fake.Config{}))
	reg.MustRegisterInterface(driver.KindPower, "other", otherPower{fake.NewPower(fake.Config{})})
	if _, ok := reg.Interface(driver.KindPower, "other"); !ok {
		t.Fatal("MustRegisterInterface did not register")
	}
	var nilPower *fake.Power
	cases := []struct {
		name string
		f    func()
		want error
		frag string
	}{
		{"duplicate implementation", func() {
			reg.MustRegisterInterface(driver.KindPower, fake.Name, fake.NewPower(fake.Config{}))
		}, driver.ErrDuplicate, `power/fake from builtin`},
		{"empty implementation name", func() {
			reg.MustRegisterInterface(driver.KindPower, "", fake.NewPower(fake.Config{}))
		}, driver.ErrInvalidParameter, "empty power implementation name"},
		{"nil implementation", func() { reg.MustRegisterInterface(driver.KindPower, "nil", nil) }, driver.ErrInvalidParameter, "power/nil has a nil implementation"},
		{"typed nil implementation", func() { reg.MustRegisterInterface(driver.KindPower, "typed-nil", nilPower) }, driver.ErrInvalidParameter, "power/typed-nil has a nil implementation (*fake.Power)"},
		{"duplicate hardware type", func() {
			h, _ := reg.HardwareType(builtin.FakeHardware)
			reg.MustRegisterHardwareType(h)
		}, driver.ErrDuplicate, `hardware type "fake-hardware"`},
		{"empty hardware type name", func() { reg.MustRegisterHardwareType(driver.HardwareType{}) }, driver.ErrInvalidParameter, "empty name"},
		{"duplicate bundle", func() { reg.MustRegister(builtin.Bundle(fake.Config{})) }, driver.ErrDuplicate, "driver: MustRegister: "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := mustPanic(t, c.f)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.frag) || !strings.HasPrefix(err.Error(), "driver: MustRegister") {
				t.Errorf("panic %q, want %v containing %q", err, c.want, c.frag)
			}
		})
	}
	// The error-returning variants refuse the same mistakes without panicking.
	if err := reg.RegisterInterface(driver.KindPower, "typed-nil", nilPower); !errors.Is(err, driver.ErrInvalidParameter) {
		t.Errorf("RegisterInterface(typed nil) = %v", err)
	}
	if _, ok := reg.Interface(driver.KindPower, "typed-nil"); ok {
		t.Error("a nil implementation was registered")
	}
}

func TestConfigWarningsReportDuplicates(t *testing.T) {
	cfg := driver.Config{
		EnabledHardwareTypes: []string{builtin.FakeHardware, builtin.ManualManagement, builtin.FakeHardware, builtin.FakeHardware},
		EnabledInterfaces: map[driver.Kind][]string{
			driver.KindPower: {fake.Name, "", fake.Name},
			driver.KindBoot:  {fake.Name},
		},
	}
	want := []string{
		`driver: enabled_hardware_types lists "fake-hardware" 3 times; the duplicates are ignored`,
		`driver: enabled_power_interfaces lists "fake" 2 times; the duplicates are ignored`,
		`driver: enabled_power_interfaces has 1 empty name(s); they are ignored`,
	}
	reg := driver.NewRegistry(cfg)
	var got []string
	for _, w := range reg.Warnings() {
		got = append(got, w.String())
	}
	if !slices.Equal(got, want) {
		t.Fatalf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if w := reg.Warnings()[0]; w.Setting != "enabled_hardware_types" || w.Name != builtin.FakeHardware || w.Count != 3 {
		t.Errorf("typed warning %+v", w)
	}
	// The duplicates are ignored, as before.
	if e := reg.Enabled(); !slices.Equal(e.HardwareTypes, []string{builtin.FakeHardware, builtin.ManualManagement}) {
		t.Errorf("enabled hardware types %v", e.HardwareTypes)
	}
	if w := (driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}}).Warnings(); w != nil {
		t.Errorf("clean config warns: %v", w)
	}
}

// A console implementation a hardware type lists first is not the
// default until it is enabled by name: an empty enabled console list is
// no-console alone, as Ironic's enabled_console_interfaces default.
func TestConsoleDefaultsToNoConsoleUntilEnabled(t *testing.T) {
	for _, tc := range []struct {
		name    string
		enabled []string
		want    string
	}{
		{"computed", nil, driver.NoConsole},
		{"enabled by name", []string{fake.Name, driver.NoConsole}, fake.Name},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := newRegistry(t, driver.Config{
				EnabledHardwareTypes: []string{builtin.FakeHardware},
				EnabledInterfaces:    map[driver.Kind][]string{driver.KindConsole: tc.enabled},
			})
			if got := reg.Enabled().Interfaces[driver.KindConsole]; tc.enabled == nil && !slices.Equal(got, []string{driver.NoConsole}) {
				t.Fatalf("computed console list %v, want [no-console]", got)
			}
			got, err := reg.DefaultInterface(builtin.FakeHardware, driver.KindConsole)
			if err != nil || got != tc.want {
				t.Fatalf("default console %q (%v), want %q (fake-hardware lists fake first)", got, err, tc.want)
			}
		})
	}
}
