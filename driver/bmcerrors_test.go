package driver_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/driver"
)

func TestCheckIdentity(t *testing.T) {
	cases := []struct {
		name, recorded, reported string
		wantErr                  bool
		wantRecorded             string
	}{
		{"first contact records", "", "redfish-uuid:AAA", false, "redfish-uuid:AAA"},
		{"same machine", "redfish-uuid:aaa", "redfish-uuid:AAA", false, "redfish-uuid:aaa"},
		{"other machine refused", "redfish-uuid:aaa", "redfish-uuid:bbb", true, "redfish-uuid:aaa"},
		{"BMC reports nothing", "redfish-uuid:aaa", "", false, "redfish-uuid:aaa"},
		{"other scheme re-records", "ipmi-guid:aaa", "redfish-uuid:bbb", false, "redfish-uuid:bbb"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			task := &driver.Task{NodeUUID: "n1", DriverInternalInfo: map[string]any{}}
			if tc.recorded != "" {
				task.DriverInternalInfo[driver.IdentityKey] = tc.recorded
			}
			err := driver.CheckIdentity(task, driver.KindPower, "redfish", "https://bmc.example", tc.reported)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if err != nil {
				var mm *driver.IdentityMismatchError
				if !errors.Is(err, driver.ErrIdentityMismatch) || !errors.As(err, &mm) {
					t.Fatalf("err %T does not match ErrIdentityMismatch", err)
				}
				for _, s := range []string{"n1", tc.recorded, tc.reported, "https://bmc.example"} {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not name %q", err, s)
					}
				}
			}
			if got, _ := task.DriverInternalInfo[driver.IdentityKey].(string); got != tc.wantRecorded {
				t.Errorf("recorded %q, want %q", got, tc.wantRecorded)
			}
		})
	}
}
