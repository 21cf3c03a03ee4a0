package rfdriver

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/plugins/redfish/redfishtest"
)

// TestEachNodeReachesOnlyItsOwnSystem enrolls one node per system behind
// one redfishtest address (as sushy-tools serves them) and checks that
// every power, boot-device and reset action reaches that node's system
// only, although all nodes share one connection and one session.
func TestEachNodeReachesOnlyItsOwnSystem(t *testing.T) {
	s := newServer(t, redfishtest.Options{Systems: 3})
	d := newDrivers(t)
	ctx := context.Background()
	ids := s.SystemIDs()
	if len(ids) != 3 {
		t.Fatalf("systems %v", ids)
	}
	// Node 0 names its system by path, node 1 by Id, node 2 by path with
	// a trailing slash.
	sysIDs := []string{redfishtest.SystemPath(ids[0]), ids[1], redfishtest.SystemPath(ids[2]) + "/"}
	tasks := make([]*driver.Task, len(ids))
	for i := range ids {
		tasks[i] = task(s, map[string]any{"redfish_system_id": sysIDs[i]})
		tasks[i].NodeUUID = "node-" + ids[i]
		if st, err := d.Power().GetPowerState(ctx, tasks[i]); err != nil || st != driver.PowerOff {
			t.Fatalf("node %d: %q %v", i, st, err)
		}
	}
	for i, id := range ids {
		before := s.Stats()
		if err := d.Power().SetPowerState(ctx, tasks[i], driver.PowerOn, 0); err != nil {
			t.Fatalf("node %d power on: %v", i, err)
		}
		if err := d.Management().SetBootDevice(ctx, tasks[i], driver.BootPXE, false); err != nil {
			t.Fatalf("node %d boot device: %v", i, err)
		}
		if err := d.Power().Reboot(ctx, tasks[i], 0); err != nil {
			t.Fatalf("node %d reboot: %v", i, err)
		}
		if err := d.Power().SetPowerState(ctx, tasks[i], driver.PowerOff, 0); err != nil {
			t.Fatalf("node %d power off: %v", i, err)
		}
		after := s.Stats()
		for _, other := range ids {
			gotResets := after.SystemResets[other][len(before.SystemResets[other]):]
			gotPatches := after.SystemBootPatches[other][len(before.SystemBootPatches[other]):]
			if other == id {
				if !slices.Equal(gotResets, []string{"On", "ForceRestart", "ForceOff"}) || !slices.Equal(gotPatches, []string{"Pxe"}) {
					t.Fatalf("node %d: its system %s got resets %v, boot patches %v", i, id, gotResets, gotPatches)
				}
				continue
			}
			if len(gotResets) != 0 || len(gotPatches) != 0 {
				t.Fatalf("node %d's actions reached system %s: resets %v, boot patches %v", i, other, gotResets, gotPatches)
			}
		}
		if bd, err := d.Management().GetBootDevice(ctx, tasks[i]); err != nil || bd.Device != driver.BootDisk && bd.Device != "" {
			// The one-time PXE override was consumed by the reboot.
			t.Fatalf("node %d boot device after reboot: %+v %v", i, bd, err)
		}
	}
	if st := s.Stats(); st.SessionsCreated != 1 {
		t.Fatalf("nodes on one BMC must share one session, got %d logins", st.SessionsCreated)
	}

	// A system id that does not exist fails the manage path (the power
	// read), although another node opened the shared connection first.
	var ip *driver.InvalidParameterError
	for _, bad := range []string{"/redfish/v1/Systems/nope", "nope"} {
		tk := task(s, map[string]any{"redfish_system_id": bad})
		_, err := d.Power().GetPowerState(ctx, tk)
		if !errors.As(err, &ip) || ip.Key != "redfish_system_id" || !strings.Contains(err.Error(), ids[1]) {
			t.Fatalf("system id %q: want InvalidParameterError naming the systems, got %v", bad, err)
		}
	}
	// Several systems and no id: a typed error naming them.
	_, err := d.Power().GetPowerState(ctx, task(s, nil))
	if !errors.As(err, &ip) || ip.Key != "redfish_system_id" || !strings.Contains(err.Error(), "manages 3 systems") {
		t.Fatalf("no system id on a BMC with 3 systems: %v", err)
	}
	c, _ := d.pool.Conn(info(t, s, nil))
	if _, err := c.System(ctx, ""); !errors.Is(err, ErrSystemSelection) || !errors.Is(err, driver.ErrInvalidParameter) {
		t.Fatalf("want ErrSystemSelection, got %v", err)
	}
}

// TestIdentityMismatchRefusesAction records the system's UUID at the
// first contact (the manage path's power read) and refuses a power action
// once the BMC at the address reports another machine, sending nothing;
// clearing the record (what the conductor does on a driver_info update)
// accepts the new machine.
func TestIdentityMismatchRefusesAction(t *testing.T) {
	s := newServer(t, redfishtest.Options{})
	d := newDrivers(t)
	ctx := context.Background()
	tk := task(s, nil)
	if _, err := d.Power().GetPowerState(ctx, tk); err != nil {
		t.Fatal(err)
	}
	recorded, _ := tk.DriverInternalInfo[driver.IdentityKey].(string)
	if want := "redfish-uuid:" + s.Resource(redfishtest.SystemPath(redfishtest.SystemID))["UUID"].(string); recorded != want {
		t.Fatalf("recorded identity %q, want %q", recorded, want)
	}
	if ch := tk.Changes(); ch.DriverInternalInfo[driver.IdentityKey] != recorded {
		t.Fatalf("the identity is not among the task's changes: %+v", ch)
	}
	const other = "0b9c7d5e-1111-4222-8333-444455556666"
	s.SetSystemUUID(redfishtest.SystemID, other)
	resets := len(s.Stats().Resets)
	for name, act := range map[string]func() error{
		"power on":    func() error { return d.Power().SetPowerState(ctx, tk, driver.PowerOn, 0) },
		"boot device": func() error { return d.Management().SetBootDevice(ctx, tk, driver.BootPXE, false) },
		"power read":  func() error { _, err := d.Power().GetPowerState(ctx, tk); return err },
	} {
		err := act()
		var im *driver.IdentityMismatchError
		if !errors.As(err, &im) || !errors.Is(err, driver.ErrIdentityMismatch) || im.Recorded != recorded || im.Reported != "redfish-uuid:"+other ||
			!strings.Contains(err.Error(), other) || !strings.Contains(err.Error(), strings.TrimPrefix(recorded, "redfish-uuid:")) {
			t.Fatalf("%s: want IdentityMismatchError naming both machines, got %v", name, err)
		}
	}
	if st := s.Stats(); len(st.Resets) != resets || len(st.SystemBootPatches[redfishtest.SystemID]) != 0 {
		t.Fatalf("an action reached the other machine: resets %v patches %v", st.Resets[resets:], st.SystemBootPatches)
	}
	tk.DeleteDriverInternalInfo(driver.IdentityKey)
	if err := d.Power().SetPowerState(ctx, tk, driver.PowerOn, 0); err != nil {
		t.Fatalf("after the record was cleared: %v", err)
	}
	if got := tk.DriverInternalInfo[driver.IdentityKey]; got != "redfish-uuid:"+other {
		t.Fatalf("new identity not recorded: %v", got)
	}
}

// TestConnectionKey checks that everything that changes what a connection
// is separates connections, that the node's system does not, and that the
// key never holds the password in clear.
func TestConnectionKey(t *testing.T) {
	base := Info{Endpoint: "https://bmc", Username: "admin", Password: "Sekr1t-pw", VerifyCA: true, AuthType: AuthAuto}
	salt := []byte("salt")
	k := base.key(salt)
	if strings.Contains(k, "Sekr1t-pw") {
		t.Fatal("the connection key holds the password in clear")
	}
	variants := map[string]func(*Info){
		"endpoint":  func(i *Info) { i.Endpoint = "https://bmc2" },
		"user":      func(i *Info) { i.Username = "root" },
		"password":  func(i *Info) { i.Password = "other" },
		"auth type": func(i *Info) { i.AuthType = AuthBasic },
		"verify":    func(i *Info) { i.VerifyCA = false },
		"ca":        func(i *Info) { i.CAPath = "/etc/ca.pem" },
	}
	for name, change := range variants {
		i := base
		change(&i)
		if i.key(salt) == k {
			t.Errorf("%s does not change the connection key", name)
		}
	}
	i := base
	i.SystemID = "/redfish/v1/Systems/2"
	if i.key(salt) != k {
		t.Error("the system id must not change the connection key (one session per BMC)")
	}
}
