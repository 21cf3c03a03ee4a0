package ipmisol_test

import (
	"context"
	"errors"
	"testing"

	"github.com/anvilmetal/anvil/console"
	"github.com/anvilmetal/anvil/console/ipmisol"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/drivertest"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/plugins/ipmi/ipmitool"
)

const nodeUUID = "6b8a1c2e-0d6f-4a57-9a5e-3f1d2c4b5a69"

func task(di map[string]any) *driver.Task {
	return &driver.Task{NodeUUID: nodeUUID, HardwareType: ipmitool.HardwareType, DriverInfo: di}
}

// Validate takes driver_info as the ipmitool interfaces do, and refuses
// an ipmi_terminal_port that is not a port with a typed error naming
// the node and the key.
func TestValidate(t *testing.T) {
	c := ipmisol.New(new(console.Manager), ipmisol.Options{})
	if err := c.Unavailable(); err != nil {
		t.Skipf("ipmitool is not installed here: %v", err)
	}
	ok := map[string]any{"ipmi_address": "192.0.2.10", "ipmi_username": "admin", "ipmi_password": "pw", "ipmi_terminal_port": 10022.0}
	if err := c.Validate(context.Background(), task(ok)); err != nil {
		t.Fatalf("valid driver_info: %v", err)
	}
	for _, port := range []any{0.0, 65536.0, "x", 22.5, true} {
		di := map[string]any{"ipmi_address": "192.0.2.10", "ipmi_terminal_port": port}
		err := c.Validate(context.Background(), task(di))
		var ip *driver.InvalidParameterError
		if !errors.As(err, &ip) || ip.Node != nodeUUID || ip.Key != "ipmi_terminal_port" || ip.Kind != driver.KindConsole || ip.Impl != ipmisol.Name {
			t.Errorf("ipmi_terminal_port %v: want an InvalidParameterError naming the node and the key, got %v", port, err)
		}
	}
	var mp *driver.MissingParameterError
	if err := c.Validate(context.Background(), task(map[string]any{})); !errors.As(err, &mp) {
		t.Errorf("no ipmi_address: want a MissingParameterError, got %v", err)
	}
	missing := ipmisol.New(new(console.Manager), ipmisol.Options{IPMI: ipmitool.Options{IpmitoolPath: "/nonexistent/ipmitool"}})
	if err := missing.Validate(context.Background(), task(ok)); !errors.Is(err, driver.ErrUnavailable) {
		t.Errorf("without ipmitool: want ErrUnavailable, got %v", err)
	}
}

// console_idle_timeout is optional whole seconds of at least 1: anything
// else is an InvalidParameterError naming the node and the key, and the
// key is listed among the interface's properties.
func TestValidateIdleTimeout(t *testing.T) {
	c := ipmisol.New(new(console.Manager), ipmisol.Options{})
	if err := c.Unavailable(); err != nil {
		t.Skipf("ipmitool is not installed here: %v", err)
	}
	for _, v := range []any{1.0, 30.0, "600"} {
		di := map[string]any{"ipmi_address": "192.0.2.10", ipmisol.IdleTimeoutKey: v}
		if err := c.Validate(context.Background(), task(di)); err != nil {
			t.Errorf("%s %v: %v", ipmisol.IdleTimeoutKey, v, err)
		}
	}
	for _, v := range []any{0.0, -5.0, 1.5, "ten", "10s", true, 1e12} {
		di := map[string]any{"ipmi_address": "192.0.2.10", ipmisol.IdleTimeoutKey: v}
		err := c.Validate(context.Background(), task(di))
		var ip *driver.InvalidParameterError
		if !errors.As(err, &ip) || ip.Node != nodeUUID || ip.Key != ipmisol.IdleTimeoutKey || ip.Kind != driver.KindConsole || ip.Impl != ipmisol.Name {
			t.Errorf("%s %v: want an InvalidParameterError naming the node and the key, got %v", ipmisol.IdleTimeoutKey, v, err)
		}
	}
	found := false
	for _, p := range c.Properties() {
		if p.Name == ipmisol.IdleTimeoutKey {
			found = !p.Required && p.Description != ""
		}
	}
	if !found {
		t.Errorf("Properties lacks an optional, described %s: %+v", ipmisol.IdleTimeoutKey, c.Properties())
	}
}

// The ipmi hardware type lists ipmitool-socat first, yet its nodes keep
// no-console until the embedder enables ipmitool-socat by name; then it
// is the default, and a node naming it before that is refused.
func TestDefaultConsole(t *testing.T) {
	c := ipmisol.New(new(console.Manager), ipmisol.Options{})
	registry := func(enabled []string) *driver.Registry {
		reg := driver.NewRegistry(driver.Config{
			EnabledHardwareTypes: []string{ipmitool.HardwareType},
			EnabledInterfaces:    map[driver.Kind][]string{driver.KindConsole: enabled},
		})
		reg.MustRegister(builtin.Bundle(fake.Config{}))
		reg.MustRegister(ipmitool.NewDrivers(ipmitool.Options{}).Bundle())
		reg.MustRegister(c.Bundle())
		return reg
	}
	if got, err := registry(nil).DefaultInterface(ipmitool.HardwareType, driver.KindConsole); err != nil || got != driver.NoConsole {
		t.Fatalf("default console with nothing enabled: %q, %v; want no-console", got, err)
	}
	_, err := registry(nil).FillDefaults(driver.NodeInterfaces{Node: nodeUUID, HardwareType: ipmitool.HardwareType,
		Interfaces: map[driver.Kind]string{driver.KindConsole: ipmisol.Name}})
	if !errors.Is(err, driver.ErrInterfaceNotFound) {
		t.Fatalf("a node naming ipmitool-socat before it is enabled: want ErrInterfaceNotFound, got %v", err)
	}
	reg := registry([]string{ipmisol.Name, driver.NoConsole})
	if got, err := reg.DefaultInterface(ipmitool.HardwareType, driver.KindConsole); err != nil || got != ipmisol.Name {
		t.Fatalf("default console once enabled: %q, %v; want %s", got, err, ipmisol.Name)
	}
	if impl, ok := reg.Interface(driver.KindConsole, ipmisol.Name); !ok || impl != c {
		t.Fatalf("registered console %v", impl)
	}
}

// TestConformance runs the driver conformance suite on the interface.
func TestConformance(t *testing.T) {
	m := console.NewManager(console.Options{})
	defer m.Close()
	c := ipmisol.New(m, ipmisol.Options{})
	if err := c.Unavailable(); err != nil {
		t.Skipf("ipmitool is not installed here: %v", err)
	}
	drivertest.Run(t, drivertest.Config{Kind: driver.KindConsole, Name: ipmisol.Name, Impl: c, NewTask: func() *driver.Task {
		return task(map[string]any{"ipmi_address": "192.0.2.10", "ipmi_username": "admin", "ipmi_password": "pw", "ipmi_cipher_suite": "3"})
	}})
}
