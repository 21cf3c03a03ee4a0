package conductor_test

import (
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/statemachine"
)

// TestUnplannableStepsFailWithIronicsMessage proves the last_error of a
// clean, deploy or service whose steps cannot be planned is Ironic's text
// ("Cannot clean node <uuid>: ...", "Cannot get deploy steps; failed to
// deploy: ...", "Cannot service node <uuid>: ..."; before, a deploy said
// "Cannot deployment node"). The intents are written into the store as a
// conductor that accepted them without checking would have left them;
// the starting conductor picks them up.
func TestUnplannableStepsFailWithIronicsMessage(t *testing.T) {
	t.Parallel()
	store := openStore(t, false)
	bad := []any{map[string]any{"interface": "bios", "step": "no_such_step", "priority": 10, "args": map[string]any{}}}
	cases := []struct {
		state, target statemachine.State
		op, argKey    string
		failed        statemachine.State
		want          func(uuid string) string
	}{
		{"deploying", "active", "deploy", "deploy_steps", statemachine.DeployFailed,
			func(string) string { return "Cannot get deploy steps; failed to deploy: " }},
		{"cleaning", "manageable", "clean", "clean_steps", statemachine.CleanFailed,
			func(u string) string { return "Cannot clean node " + u + ": " }},
		{"servicing", "active", "service", "service_steps", statemachine.ServiceFailed,
			func(u string) string { return "Cannot service node " + u + ": " }},
	}
	uuids := make([]string, len(cases))
	for i, c := range cases {
		n := &baremetal.Node{Name: uniqueName("unplannable-" + c.op), Driver: builtin.FakeHardware,
			PowerInterface: fake.Name, DeployInterface: fake.Name,
			ProvisionState: c.state, TargetProvisionState: c.target,
			DriverInternalInfo: map[string]any{"anvil_intent": map[string]any{
				"op": c.op, "requested_at": time.Now().UTC().Format(time.RFC3339Nano),
				"args": map[string]any{c.argKey: bad}}}}
		if err := store.CreateNode(t.Context(), n); err != nil {
			t.Fatal(err)
		}
		uuids[i] = n.UUID
	}
	h := newHarness(t, store, fake.Config{}, conductor.Options{})
	for i, c := range cases {
		n := h.waitFor(uuids[i], c.failed)
		if want := c.want(n.UUID); !strings.HasPrefix(n.LastError, want) || !strings.Contains(n.LastError, "no_such_step") {
			t.Errorf("%s: last_error %q, want it to start with %q and name the step", c.op, n.LastError, want)
		}
	}
}
