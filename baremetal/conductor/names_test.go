package conductor_test

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/storetest"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/statemachine"
)

// nodeNameCases are Ironic's node name rules (RFC 3986 unreserved
// characters, not UUID-like, at most 255 characters) plus Anvil's refusal
// of "." and "..".
var nodeNameCases = []struct {
	name  string
	valid bool
}{
	{"node-1", true},
	{"rack1.u42_a~b", true},
	{"~", true},
	{"-", true},
	{"...", true},
	{".hidden", true},
	{"a..b", true},
	{strings.Repeat("n", 255), true},
	{"1be26c0b-03f2-4d2e-ae87-c02d7f33c12", true}, // 31 hex digits
	{"1be26c0b03f24d2eae87c02d7f33c123x", true},   // 32 hex digits and a letter
	{".", false},
	{"..", false},
	{strings.Repeat("n", 256), false},
	{"has space", false},
	{"a/b", false},
	{"a%2Fb", false},
	{"a?b", false},
	{"a#b", false},
	{"a:b", false},
	{"a@b", false},
	{"ünïcode", false},
	{"tab\there", false},
	{"nul\x00", false},
	{"1be26c0b-03f2-4d2e-ae87-c02d7f33c123", false},
	{"1BE26C0B-03F2-4D2E-AE87-C02D7F33C123", false},
	{"1be26c0b03f24d2eae87c02d7f33c123", false},
	{"1be26c0b03f2-4d2eae87c02d7f33c123-", false},
	{"-1-b-e-2-6-c0b03f24d2eae87c02d7f33c123", false},
}

func TestValidNodeName(t *testing.T) {
	t.Parallel()
	for _, c := range nodeNameCases {
		if got := baremetal.ValidNodeName(c.name); got != c.valid {
			t.Errorf("ValidNodeName(%q) = %t, want %t", c.name, got, c.valid)
		}
		err := baremetal.CheckNodeName("n-1", c.name)
		var ife *baremetal.InvalidFieldError
		if c.valid != (err == nil) || (err != nil && (!errors.As(err, &ife) || ife.Field != "name" || ife.Ident != "n-1" || ife.Expected == "")) {
			t.Errorf("CheckNodeName(%q) = %v", c.name, err)
		}
	}
	if baremetal.CheckNodeName("n-1", "") != nil {
		t.Error("an empty name (no name) is refused")
	}
}

var uuidPattern = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// TestEnrollAndUpdateApplyNodeNameRules proves the name rules hold at
// Enroll and at Update: a bad name is refused with an *InvalidFieldError
// on "name", nothing is stored, and the node being updated is unchanged.
func TestEnrollAndUpdateApplyNodeNameRules(t *testing.T) {
	t.Parallel()
	store := openStore(t, false)
	h := newHarness(t, store, fake.Config{}, conductor.Options{})
	existing := h.enroll("renamed", nil)
	for i, c := range nodeNameCases {
		n, err := h.c.Enroll(h.ctx, &baremetal.Node{Name: c.name, Driver: builtin.FakeHardware})
		if c.valid {
			if err != nil {
				t.Errorf("Enroll(%q) = %v", c.name, err)
				continue
			}
			h.must(h.c.Delete(h.ctx, n.UUID))
		} else {
			var ife *baremetal.InvalidFieldError
			if !errors.As(err, &ife) || ife.Field != "name" {
				t.Errorf("Enroll(%q) = %v, want an *InvalidFieldError on name", c.name, err)
			} else if uuidPattern.MatchString(strings.ToLower(ife.Ident)) && !strings.EqualFold(ife.Ident, c.name) {
				t.Errorf("Enroll(%q) error names UUID %s that was never stored", c.name, ife.Ident)
			}
		}
		before, err := store.GetNode(h.ctx, existing.UUID)
		if err != nil {
			t.Fatal(err)
		}
		_, err = h.c.Update(h.ctx, existing.UUID, func(n *baremetal.Node) error { n.Name = c.name; return nil })
		if c.valid {
			if err != nil {
				t.Errorf("Update to name %q = %v", c.name, err)
			}
			continue
		}
		var ife *baremetal.InvalidFieldError
		if !errors.As(err, &ife) || ife.Field != "name" || ife.Ident != existing.UUID {
			t.Errorf("Update to name %q = %v, want an *InvalidFieldError on name of %s", c.name, err, existing.UUID)
		}
		after, err := store.GetNode(h.ctx, existing.UUID)
		if err != nil {
			t.Fatal(err)
		}
		if d := storetest.DiffNodes(before, after); d != "" {
			t.Errorf("case %d: refused Update changed the node:\n%s", i, d)
		}
	}
	if nodes, err := store.ListNodes(h.ctx, baremetal.NodeFilter{}, baremetal.Page{}); err != nil || len(nodes) != 1 {
		t.Fatalf("after the table %d nodes (%v), want only the renamed one", len(nodes), err)
	}
}

// TestEnrollRefusesUnknownStatesNamingWhatTheCallerGave proves Enroll
// checks the power state against the known ones and that its errors name
// the node by what the caller gave (its UUID or name), or say it is an
// unnamed node that was not stored, never a UUID no node has.
func TestEnrollRefusesUnknownStatesNamingWhatTheCallerGave(t *testing.T) {
	t.Parallel()
	store := openStore(t, false)
	h := newHarness(t, store, fake.Config{}, conductor.Options{})
	const given = "5e0f7bb4-6b5e-4d43-9d55-9d2f6d6a0c11"
	cases := []struct {
		name  string
		node  baremetal.Node
		field string
		ident string
		is    error
	}{
		{"unknown power state, named", baremetal.Node{Name: "web-1", Driver: builtin.FakeHardware, PowerState: "banana"}, "power_state", "web-1", statemachine.ErrUnknownPowerState},
		{"unknown power state, unnamed", baremetal.Node{Driver: builtin.FakeHardware, PowerState: "banana"}, "power_state", "(unnamed, not stored)", statemachine.ErrUnknownPowerState},
		{"unknown power state, given UUID", baremetal.Node{UUID: given, Driver: builtin.FakeHardware, PowerState: "on"}, "power_state", given, statemachine.ErrUnknownPowerState},
		{"pending power target", baremetal.Node{Name: "web-2", Driver: builtin.FakeHardware, TargetPowerState: "power on"}, "target_power_state", "web-2", nil},
		{"no driver, unnamed", baremetal.Node{}, "driver", "(unnamed, not stored)", nil},
		{"bad provision state, named", baremetal.Node{Name: "web-3", Driver: builtin.FakeHardware, ProvisionState: "active"}, "provision_state", "web-3", nil},
		{"bad instance_uuid from the store, unnamed", baremetal.Node{Driver: builtin.FakeHardware, InstanceUUID: "not-a-uuid"}, "instance_uuid", "(unnamed, not stored)", nil},
		{"bad instance_uuid from the store, named", baremetal.Node{Name: "web-4", Driver: builtin.FakeHardware, InstanceUUID: "not-a-uuid"}, "instance_uuid", "web-4", nil},
	}
	for _, c := range cases {
		_, err := h.c.Enroll(h.ctx, &c.node)
		var ife *baremetal.InvalidFieldError
		if !errors.As(err, &ife) || ife.Field != c.field || ife.Ident != c.ident {
			t.Errorf("%s: Enroll = %v, want an *InvalidFieldError on %s naming %q", c.name, err, c.field, c.ident)
			continue
		}
		if c.is != nil && !errors.Is(err, c.is) {
			t.Errorf("%s: %v does not match %v", c.name, err, c.is)
		}
		if c.node.UUID == "" && uuidPattern.MatchString(err.Error()) {
			t.Errorf("%s: error names a UUID that was never stored: %v", c.name, err)
		}
	}
	for _, ps := range []statemachine.PowerState{"", "power on", "power off", "error"} {
		n, err := h.c.Enroll(h.ctx, &baremetal.Node{Driver: builtin.FakeHardware, PowerState: ps})
		if err != nil {
			t.Errorf("Enroll with power state %q = %v", ps, err)
			continue
		}
		if n.PowerState != ps {
			t.Errorf("power state %q stored as %q", ps, n.PowerState)
		}
	}
	if nodes, err := store.ListNodes(h.ctx, baremetal.NodeFilter{}, baremetal.Page{}); err != nil || len(nodes) != 4 {
		t.Fatalf("%d nodes stored (%v), want only the 4 good ones", len(nodes), err)
	}
}
