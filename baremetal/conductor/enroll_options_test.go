package conductor_test

import (
	"errors"
	"testing"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/statemachine"
)

func TestEnrollWithOptions(t *testing.T) {
	h := newHarness(t, openStore(t, false), fake.Config{}, conductor.Options{Hostname: "enroll-opts"})
	cases := []struct {
		name string
		opts conductor.EnrollOptions
		want statemachine.State
	}{
		{"default is enroll", conductor.EnrollOptions{}, statemachine.Enroll},
		{"available as before API 1.11", conductor.EnrollOptions{Available: true}, statemachine.Available},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n, err := h.c.EnrollWith(h.ctx, &baremetal.Node{Name: "eo-" + string(tc.want), Driver: "fake-hardware"}, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			stored, err := h.store.GetNode(h.ctx, n.UUID)
			if err != nil {
				t.Fatal(err)
			}
			if stored.ProvisionState != tc.want || stored.TargetProvisionState != "" || stored.PowerInterface == "" {
				t.Fatalf("stored state %q target %q power interface %q, want %q with defaults filled",
					stored.ProvisionState, stored.TargetProvisionState, stored.PowerInterface, tc.want)
			}
		})
	}
	// The checks are Enroll's: an invalid node is refused whatever the options.
	_, err := h.c.EnrollWith(h.ctx, &baremetal.Node{Name: "bad name/x", Driver: "fake-hardware"}, conductor.EnrollOptions{Available: true})
	if !errors.Is(err, baremetal.ErrInvalidInput) {
		t.Fatalf("invalid name: %v", err)
	}
	if c, _ := h.store.CountNodes(h.ctx, baremetal.NodeFilter{}); c != 2 {
		t.Fatalf("%d nodes stored, want 2", c)
	}
}

func TestUpdateWithClearInstanceInMaintenance(t *testing.T) {
	h := newHarness(t, openStore(t, false), fake.Config{}, conductor.Options{Hostname: "update-opts"})
	n, err := h.c.Enroll(h.ctx, &baremetal.Node{Name: "stuck", Driver: "fake-hardware"})
	if err != nil {
		t.Fatal(err)
	}
	// A node stuck in a transition, bound to an instance, in maintenance.
	stuck, _ := h.store.GetNode(h.ctx, n.UUID)
	stuck.ProvisionState, stuck.TargetProvisionState = statemachine.Deploying, statemachine.Active
	stuck.InstanceUUID, stuck.Maintenance = "bbbbbbbb-0000-4000-8000-000000000001", true
	if err := h.store.UpdateNode(h.ctx, stuck, ""); err != nil {
		t.Fatal(err)
	}
	clearInstance := func(x *baremetal.Node) error { x.InstanceUUID = ""; return nil }
	alsoName := func(x *baremetal.Node) error { x.InstanceUUID = ""; x.Name = "renamed"; return nil }
	traits := func(x *baremetal.Node) error { x.Traits = []string{"CUSTOM_GPU"}; return nil }
	traitsAndExtra := func(x *baremetal.Node) error {
		x.Traits = []string{"CUSTOM_X"}
		x.Extra = map[string]any{"a": "b"}
		return nil
	}
	cases := []struct {
		name   string
		opts   conductor.UpdateOptions
		change func(*baremetal.Node) error
		ok     bool
	}{
		{"plain update refused in a transition", conductor.UpdateOptions{}, clearInstance, false},
		{"more than instance_uuid refused", conductor.UpdateOptions{ClearInstanceInMaintenance: true}, alsoName, false},
		{"traits refused without the option", conductor.UpdateOptions{}, traits, false},
		{"traits with more refused", conductor.UpdateOptions{TraitsInAnyState: true}, traitsAndExtra, false},
		{"traits alone allowed in any state", conductor.UpdateOptions{TraitsInAnyState: true}, traits, true},
		{"instance_uuid alone allowed in maintenance", conductor.UpdateOptions{ClearInstanceInMaintenance: true}, clearInstance, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.c.UpdateWith(h.ctx, n.UUID, tc.opts, tc.change)
			if tc.ok != (err == nil) {
				t.Fatalf("err = %v, want ok=%v", err, tc.ok)
			}
			if !tc.ok && !errors.Is(err, conductor.ErrUpdateInProgress) {
				t.Fatalf("refusal %v does not match ErrUpdateInProgress", err)
			}
		})
	}
	got, _ := h.store.GetNode(h.ctx, n.UUID)
	if got.InstanceUUID != "" || got.Name != "stuck" || got.Reservation != "" || got.ProvisionState != statemachine.Deploying ||
		len(got.Traits) != 1 || got.Traits[0] != "CUSTOM_GPU" || got.Extra != nil {
		t.Fatalf("after: instance %q name %q reservation %q state %q", got.InstanceUUID, got.Name, got.Reservation, got.ProvisionState)
	}
}
