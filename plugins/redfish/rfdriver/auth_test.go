package rfdriver

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/plugins/redfish/redfishtest"
)

// TestAutoAuthWithoutSessionService covers a BMC without a session
// service as sushy-tools is (a session POST answers 401 without Basic
// credentials, 404 with them): auth auto must work with HTTP Basic,
// whether the service root names no session service (detected without a
// login) or names one anyway (the 401 is followed by a Basic check), and
// only a 401 to Basic as well is reported as bad credentials.
func TestAutoAuthWithoutSessionService(t *testing.T) {
	ctx := context.Background()
	for _, advertised := range []bool{false, true} {
		name := "root without sessions"
		if advertised {
			name = "root naming sessions"
		}
		t.Run(name, func(t *testing.T) {
			s := newServer(t, redfishtest.Options{NoSessions: true})
			if advertised {
				s.Mutate("/redfish/v1", func(m map[string]any) {
					m["Links"] = map[string]any{"Sessions": map[string]any{"@odata.id": "/redfish/v1/SessionService/Sessions"}}
				})
			}
			d := newDrivers(t)
			tk := task(s, map[string]any{"redfish_auth_type": "auto"})
			if err := d.Power().SetPowerState(ctx, tk, driver.PowerOn, 0); err != nil {
				t.Fatalf("power on with correct credentials: %v", err)
			}
			if st, err := d.Power().GetPowerState(ctx, tk); err != nil || st != driver.PowerOn {
				t.Fatalf("power state %q %v", st, err)
			}
			if st := s.Stats(); st.SessionsCreated != 0 || (!advertised && st.Unauthorized != 0) || (advertised && st.Unauthorized != 1) {
				t.Fatalf("unexpected %+v", st)
			}

			bad := task(s, map[string]any{"redfish_auth_type": "auto", "redfish_password": "hunter2-wrong"})
			_, err := d.Power().GetPowerState(ctx, bad)
			var ae *driver.BMCAuthError
			if !errors.As(err, &ae) || !errors.Is(err, driver.ErrBMCAuthentication) || ae.Username != "admin" || ae.Address != s.URL() || ae.Node != bad.NodeUUID {
				t.Fatalf("wrong password: want BMCAuthError, got %v", err)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("error leaks the password: %v", err)
			}
		})
	}
}

// TestSessionAuthStillUsesSessions checks that a BMC with a session
// service still gets one (auto reads the root and logs in), and that a
// wrong password there is a BMCAuthError too.
func TestSessionAuthStillUsesSessions(t *testing.T) {
	s := newServer(t, redfishtest.Options{})
	d := newDrivers(t)
	ctx := context.Background()
	if _, err := d.Power().GetPowerState(ctx, task(s, nil)); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.SessionsCreated != 1 {
		t.Fatalf("auto on a BMC with sessions: %d logins", st.SessionsCreated)
	}
	_, err := d.Power().GetPowerState(ctx, task(s, map[string]any{"redfish_password": "wrong"}))
	if !errors.Is(err, driver.ErrBMCAuthentication) {
		t.Fatalf("want BMCAuthError, got %v", err)
	}
}
