package rfdriver

import (
	"testing"
	"time"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/drivertest"
	"github.com/anvilmetal/anvil/plugins/redfish/redfishtest"
)

// TestConformance runs the driver conformance suite in process against
// the mockup server, plain and over HTTPS.
func TestConformance(t *testing.T) {
	for _, tlsOn := range []bool{false, true} {
		name := "http"
		if tlsOn {
			name = "https"
		}
		t.Run(name, func(t *testing.T) {
			s := newServer(t, redfishtest.Options{TLS: tlsOn})
			slow := newServer(t, redfishtest.Options{TLS: tlsOn, Latency: 2 * time.Second})
			d := NewDrivers(Options{Sleep: noSleep, PollInterval: time.Millisecond, RootCAs: s.CertPool()})
			t.Cleanup(func() { _ = d.Close(t.Context()) })
			newTask := func() *driver.Task {
				tk := task(s, nil)
				if tlsOn {
					tk.DriverInfo["redfish_verify_ca"] = false
				}
				return tk
			}
			for _, i := range d.Bundle().Implementations {
				t.Run(string(i.Kind)+"/"+i.Name, func(t *testing.T) {
					c := drivertest.Config{Kind: i.Kind, Name: i.Name, Impl: i.Impl, NewTask: newTask}
					if hasReadOperation(i.Kind) {
						c.Slow = func(tk *driver.Task) { tk.DriverInfo["redfish_address"] = slow.URL() }
					}
					drivertest.Run(t, c)
				})
			}
		})
	}
}

// hasReadOperation reports whether the suite's slow-operation check has a
// BMC read to interrupt for kind; for the others it would call Validate,
// which never contacts the BMC and so cannot be slow.
func hasReadOperation(k driver.Kind) bool {
	switch k {
	case driver.KindPower, driver.KindManagement, driver.KindBIOS, driver.KindFirmware:
		return true
	}
	return false
}
