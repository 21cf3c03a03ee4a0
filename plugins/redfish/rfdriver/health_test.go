package rfdriver

import (
	"context"
	"testing"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/plugins/redfish/redfishtest"
)

// TestHealth reads the node's health from the ComputerSystem's Status as
// the BMC changes it: the DMTF mockup's system reports Health OK and
// HealthRollup Warning; a failed fan turns the rollup Critical; a
// service that reports no Status gives no health.
func TestHealth(t *testing.T) {
	s := newServer(t, redfishtest.Options{})
	d := newDrivers(t)
	ctx := context.Background()
	tk := task(s, nil)
	var hr driver.HealthReader = d.Management()
	uri := "/redfish/v1/Systems/" + redfishtest.SystemID
	for _, tc := range []struct {
		health, rollup string
		want           driver.Health
	}{
		{"", "", driver.HealthWarning}, // the mockup as shipped
		{"OK", "Critical", driver.HealthCritical},
		{"Warning", "OK", driver.HealthWarning},
		{"OK", "OK", driver.HealthOK},
		{"OK", "Bogus", driver.HealthOK},
		{"-", "-", driver.HealthUnknown},
	} {
		if tc.health != "" {
			if !s.Mutate(uri, func(m map[string]any) {
				if tc.health == "-" {
					delete(m, "Status")
					return
				}
				m["Status"] = map[string]any{"State": "Enabled", "Health": tc.health, "HealthRollup": tc.rollup}
			}) {
				t.Fatalf("no system at %s", uri)
			}
		}
		got, err := hr.Health(ctx, tk)
		if err != nil {
			t.Fatalf("Health (%s/%s): %v", tc.health, tc.rollup, err)
		}
		if got != tc.want {
			t.Errorf("Health with Status.Health %q, HealthRollup %q = %q, want %q", tc.health, tc.rollup, got, tc.want)
		}
	}
}
