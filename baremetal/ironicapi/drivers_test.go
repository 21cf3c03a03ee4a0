package ironicapi_test

import (
	"context"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/drivers"
)

func TestDriversThroughGophercloud(t *testing.T) {
	l := newLab(t)
	ctx := context.Background()
	sc := l.client(t, "1.89")
	pages, err := drivers.ListDrivers(sc, nil).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	all, err := drivers.ExtractDrivers(pages)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 || all[0].Name != "fake-hardware" || all[0].Type != "dynamic" || strings.Join(all[0].Hosts, ",") != "api-test" || all[0].DefaultPowerInterface != "" {
		t.Fatalf("drivers %+v", all)
	}
	pages, err = drivers.ListDrivers(sc, drivers.ListDriversOpts{Detail: true}).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	detailed, _ := drivers.ExtractDrivers(pages)
	one, err := drivers.GetDriverDetails(ctx, sc, "fake-hardware").Extract()
	if err != nil {
		t.Fatal(err)
	}
	en := l.reg.Enabled()
	for _, d := range []drivers.Driver{detailed[0], *one} {
		for _, tc := range []struct {
			kind    driver.Kind
			def     string
			enabled []string
		}{
			{driver.KindPower, d.DefaultPowerInterface, d.EnabledPowerInterfaces},
			{driver.KindDeploy, d.DefaultDeployInterface, d.EnabledDeployInterfaces},
			{driver.KindBoot, d.DefaultBootInterface, d.EnabledBootInterfaces},
			{driver.KindFirmware, d.DefaultFirmwareInterface, d.EnabledFirmwareInterfaces},
			{driver.KindConsole, d.DefaultConsoleInterface, d.EnabledConsoleInterface},
		} {
			want, err := l.reg.DefaultInterface("fake-hardware", tc.kind)
			if err != nil {
				t.Fatal(err)
			}
			if tc.def != want || strings.Join(tc.enabled, ",") != strings.Join(en.Interfaces[tc.kind], ",") {
				t.Errorf("%s: default %q enabled %v; registry %q %v", tc.kind, tc.def, tc.enabled, want, en.Interfaces[tc.kind])
			}
		}
	}
	if _, err := drivers.GetDriverDetails(ctx, sc, "ipmi").Extract(); err == nil {
		t.Fatal("a hardware type nobody enables was found")
	}
	props, err := drivers.GetDriverProperties(ctx, sc, "fake-hardware").Extract()
	if err != nil {
		t.Fatal(err)
	}
	var fakeDesc string
	power, _ := l.reg.DefaultInterface("fake-hardware", driver.KindPower)
	impl, _ := l.reg.Interface(driver.KindPower, power)
	for _, p := range impl.Properties() {
		if p.Name == fake.DelayKey {
			fakeDesc = p.Description
		}
	}
	if fakeDesc == "" || (*props)[fake.DelayKey] != fakeDesc {
		t.Fatalf("properties %v lack %s (%q)", *props, fake.DelayKey, fakeDesc)
	}
	methods, err := drivers.ListVendorPassthruMethods(ctx, sc, "fake-hardware").Extract()
	if err != nil || len(methods) != 0 {
		t.Fatalf("vendor methods %v, %v", methods, err)
	}
}

func TestDriverFieldsPerVersion(t *testing.T) {
	l := newLab(t)
	cases := []struct {
		path, version string
		status        int
		has, hasNot   []string
	}{
		{"/v1/drivers/fake-hardware", "1.1", 200, []string{"name", "hosts", "links"}, []string{"properties", "type", "default_power_interface"}},
		{"/v1/drivers/fake-hardware", "1.14", 200, []string{"properties"}, []string{"type"}},
		{"/v1/drivers/fake-hardware", "1.30", 200, []string{"type", "default_power_interface", "enabled_deploy_interfaces", "default_console_interface"}, []string{"default_storage_interface"}},
		{"/v1/drivers/fake-hardware", "1.33", 200, []string{"default_storage_interface"}, []string{"default_rescue_interface"}},
		{"/v1/drivers/fake-hardware", "1.40", 200, []string{"default_rescue_interface", "enabled_bios_interfaces"}, []string{"default_firmware_interface"}},
		{"/v1/drivers/fake-hardware", "1.86", 200, []string{"default_firmware_interface", "enabled_firmware_interfaces"}, nil},
		{"/v1/drivers/fake-hardware?fields=name,hosts", "1.77", 200, []string{"name", "hosts", "links"}, []string{"type"}},
		{"/v1/drivers?detail=True", "1.30", 200, nil, nil},
		{"/v1/drivers/fake-hardware?fields=name", "1.76", 406, nil, nil},
		{"/v1/drivers/fake-hardware?fields=default_firmware_interface", "1.85", 400, nil, nil},
		{"/v1/drivers?fields=colour", "1.77", 400, nil, nil},
		{"/v1/drivers?detail=True&fields=name", "1.77", 400, nil, nil},
		{"/v1/drivers?detail=True", "1.29", 406, nil, nil},
		{"/v1/drivers?type=dynamic", "1.29", 406, nil, nil},
		{"/v1/drivers?type=weird", "1.30", 400, nil, nil},
		{"/v1/drivers/nothing", "1.30", 404, nil, nil},
		{"/v1/drivers/nothing/properties", "1.30", 404, nil, nil},
	}
	for _, tc := range cases {
		st, _, body := do(t, "GET", l.srv.URL+tc.path, tc.version, "")
		if st != tc.status {
			t.Errorf("%s at %s: %d, want %d: %s", tc.path, tc.version, st, tc.status, body)
			continue
		}
		if st != 200 {
			if faultString(t, body) == "" {
				t.Errorf("%s: empty faultstring", tc.path)
			}
			continue
		}
		m := decodeJSON(t, body)
		if list, ok := m["drivers"].([]any); ok {
			if len(list) != 1 {
				t.Fatalf("%s: %v", tc.path, m)
			}
			m = list[0].(map[string]any)
			if _, ok := m["default_power_interface"]; !ok {
				t.Errorf("%s: the detailed listing lacks the interfaces", tc.path)
			}
		}
		for _, f := range tc.has {
			if _, ok := m[f]; !ok {
				t.Errorf("%s at %s lacks %s", tc.path, tc.version, f)
			}
		}
		for _, f := range tc.hasNot {
			if _, ok := m[f]; ok {
				t.Errorf("%s at %s shows %s", tc.path, tc.version, f)
			}
		}
	}
	_, _, body := do(t, "GET", l.srv.URL+"/v1/drivers?type=classic", "1.30", "")
	if list := decodeJSON(t, body)["drivers"].([]any); len(list) != 0 {
		t.Fatalf("classic drivers %v", list)
	}
}

func TestDriverHostsFromTheConductorsTable(t *testing.T) {
	l := newLab(t)
	ctx := context.Background()
	s := l.c.Store()
	rows := []baremetal.HardwareInterface{{HardwareType: "fake-hardware", InterfaceType: "power", InterfaceName: "fake", Default: true},
		{HardwareType: "redfish", InterfaceType: "power", InterfaceName: "redfish", Default: true}}
	for _, host := range []string{"peer-1", "peer-gone"} {
		if _, err := s.RegisterConductor(ctx, baremetal.ConductorRegistration{Hostname: host, Drivers: []string{"fake-hardware", "redfish"}, Interfaces: rows}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.UnregisterConductor(ctx, "peer-gone"); err != nil {
		t.Fatal(err)
	}
	hosts := func() map[string]string {
		t.Helper()
		_, _, body := do(t, "GET", l.srv.URL+"/v1/drivers", "1.30", "")
		out := map[string]string{}
		for _, d := range decodeJSON(t, body)["drivers"].([]any) {
			m := d.(map[string]any)
			var hs []string
			for _, h := range m["hosts"].([]any) {
				hs = append(hs, h.(string))
			}
			out[m["name"].(string)] = strings.Join(hs, ",")
		}
		return out
	}
	if got := hosts(); len(got) != 2 || got["fake-hardware"] != "api-test,peer-1" || got["redfish"] != "peer-1" {
		t.Fatalf("hosts %v: live conductors only, each type with its hosts", got)
	}
	// With no live conductor in the table the registry still answers:
	// the list is never empty while hardware types are enabled.
	for _, host := range []string{"api-test", "peer-1"} {
		if err := s.UnregisterConductor(ctx, host); err != nil {
			t.Fatal(err)
		}
	}
	if got := hosts(); len(got) != 1 || got["fake-hardware"] != "api-test" {
		t.Fatalf("hosts without live rows %v", got)
	}
	_, _, body := do(t, "GET", l.srv.URL+"/v1/drivers/fake-hardware", "1.86", "")
	if m := decodeJSON(t, body); m["default_power_interface"] == nil || len(m["enabled_power_interfaces"].([]any)) == 0 {
		t.Fatalf("detail from the registry %v", m)
	}
}
