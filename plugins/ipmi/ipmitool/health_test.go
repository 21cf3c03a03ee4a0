package ipmitool

import (
	"context"
	"testing"

	"github.com/anvilmetal/anvil/driver"
)

// TestHealth reads the node's health from the chassis status and the
// SDR as the BMC reports faults: ipmi_sim's quiet chassis with no
// sensors is OK, a cooling/fan fault or a critical sensor is Critical, a
// drive fault or a non-critical sensor is Warning.
func TestHealth(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		fault []string
		sdr   string
		want  driver.Health
	}{
		{"quiet chassis, no SDR", nil, "", driver.HealthOK},
		{"fan fault", []string{"Cooling/Fan Fault"}, "", driver.HealthCritical},
		{"drive fault", []string{"Drive Fault"}, "", driver.HealthWarning},
		{"main power fault", []string{"Main Power Fault"}, "", driver.HealthCritical},
		{"sensors ok", nil, "CPU Temp | 30h | ok | 3.1 | 45 degrees C\nFan 1 | 31h | ns | 29.1 | No Reading\n", driver.HealthOK},
		{"non-critical sensor", nil, "CPU Temp | 30h | nc | 3.1 | 88 degrees C\n", driver.HealthWarning},
		{"failed fan sensor", []string{"Drive Fault"}, "Fan 1 | 31h | cr | 29.1 | 0 RPM\n", driver.HealthCritical},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeBMC(t)
			f.chassisFault, f.sdr = tc.fault, tc.sdr
			d := NewDrivers(f.opts())
			got, err := d.Management().Health(ctx, fakeTask(f, nil))
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("health = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParseChassisStatusRefusesOtherOutput(t *testing.T) {
	if _, err := parseChassisStatus("Chassis Power is on\n"); err == nil {
		t.Fatal("power status output parsed as a chassis status")
	}
}
