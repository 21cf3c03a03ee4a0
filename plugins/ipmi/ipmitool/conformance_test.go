package ipmitool

import (
	"testing"
	"time"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/drivertest"
	"github.com/anvilmetal/anvil/internal/ipmisim"
)

// TestConformance runs the driver conformance suite in process against a
// simulated BMC.
func TestConformance(t *testing.T) {
	ipmisim.Require(t)
	b := ipmisim.Start(t, ipmisim.Options{})
	d := NewDrivers(Options{PollInterval: 50 * time.Millisecond, PowerTimeout: 10 * time.Second})
	for _, i := range d.Bundle().Implementations {
		t.Run(string(i.Kind), func(t *testing.T) {
			c := drivertest.Config{Kind: i.Kind, Name: i.Name, Impl: i.Impl, NewTask: func() *driver.Task { return simTask(b) }}
			// Vendor has no read operation; the suite would time Validate,
			// which never contacts the BMC.
			if i.Kind != driver.KindVendor {
				c.Slow = func(tk *driver.Task) { tk.DriverInfo["ipmi_port"] = "1" } // nothing answers there
			}
			drivertest.Run(t, c)
		})
	}
}

// BenchmarkPowerState measures one power-state read in process through
// ipmitool against ipmi_sim (two ipmitool runs: the GUID, then the state).
func BenchmarkPowerState(b *testing.B) {
	ipmisim.Require(b)
	bmc := ipmisim.Start(b, ipmisim.Options{})
	d := NewDrivers(Options{})
	tk := simTask(bmc)
	p := d.Power()
	for b.Loop() {
		if st, err := p.GetPowerState(b.Context(), tk); err != nil || st != driver.PowerOff {
			b.Fatalf("%q %v", st, err)
		}
	}
}
