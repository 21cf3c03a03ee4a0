package noop_test

import (
	"context"
	"errors"
	"testing"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/noop"
)

func newTask() *driver.Task {
	return &driver.Task{NodeUUID: "6f2b1c8e-1d8a-4a51-9c55-0d5d3c9e7a10", HardwareType: builtin.FakeHardware,
		DriverInfo: map[string]any{"ipmi_password": "hunter2", "ipmi_address": "10.0.0.1"}}
}

func TestNoopImplementationsAreUnsupported(t *testing.T) {
	ctx := context.Background()
	for _, i := range []driver.Interface{noop.NewBIOS(), noop.NewRAID(), noop.NewConsole(), noop.NewVendor(), noop.NewRescue(), noop.NewFirmware(), noop.NewInspect()} {
		err := i.Validate(ctx, newTask())
		var u *driver.UnsupportedError
		if !errors.As(err, &u) || !errors.Is(err, driver.ErrUnsupported) {
			t.Errorf("%T.Validate = %v", i, err)
		}
	}
	if _, err := noop.NewVendor().Call(ctx, newTask(), "x", "POST", nil); !errors.Is(err, driver.ErrUnsupported) {
		t.Errorf("no-vendor call = %v", err)
	}
}
