package conductor_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/configdrive"
	"github.com/anvilmetal/anvil/baremetal/storetest"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/statemachine"
	"github.com/anvilmetal/anvil/steps"
)

// TestDeployAndRebuildRefuseBadRequestsChangingNothing proves that Deploy
// and Rebuild validate their request in the call, as Clean and Service
// do: each bad request is refused with an *InvalidFieldError naming the
// node and the field, and the node is left exactly as it was (no version
// bump, no instance_info change, no state change, no reservation). The
// config drive over 64 MiB is refused before it is stored, and quickly.
func TestDeployAndRebuildRefuseBadRequestsChangingNothing(t *testing.T) {
	// Not parallel: it times the refusal of an oversized config drive,
	// which other tests competing for the CPU would slow down.
	h := newAgentHarness(t, conductor.Options{DisableAutomatedClean: true}, (&agentRecorder{}).factory)
	available := func(n *baremetal.Node) *baremetal.Node {
		h.must(h.c.Manage(h.ctx, n.UUID))
		h.waitFor(n.UUID, statemachine.Manageable)
		h.must(h.c.Provide(h.ctx, n.UUID))
		return h.waitFor(n.UUID, statemachine.Available)
	}
	enrollFake := func(name string) *baremetal.Node {
		n, err := h.c.Enroll(h.ctx, &baremetal.Node{Name: uniqueName(name), Driver: builtin.FakeHardware,
			PowerInterface: fake.Name, DeployInterface: fake.Name})
		if err != nil {
			t.Fatal(err)
		}
		return available(n)
	}
	fakeNode := enrollFake("fake-deploy")
	directNode := available(h.enrollAgentNode("direct-deploy"))
	// The direct node loses its image_source: a deploy of it cannot work.
	if _, err := h.c.Update(h.ctx, directNode.UUID, func(n *baremetal.Node) error {
		delete(n.InstanceInfo, "image_source")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	activeNode := enrollFake("fake-rebuild")
	h.must(h.c.Deploy(h.ctx, activeNode.UUID, conductor.DeployOptions{}))
	h.waitFor(activeNode.UUID, statemachine.Active)

	gzipped := func(n int) json.RawMessage {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		if _, err := zw.Write(make([]byte, n)); err != nil {
			t.Fatal(err)
		}
		zw.Close()
		raw, _ := json.Marshal(base64.StdEncoding.EncodeToString(b.Bytes()))
		return raw
	}
	bigContents, err := json.Marshal(map[string]any{"user_data": strings.Repeat("#cloud-config\n", 68<<20/14)})
	if err != nil {
		t.Fatal(err)
	}
	// The contents case must cost no more than a few decodes of the
	// document: the bound is measured on this machine, in this run, so a
	// loaded machine or the race detector does not fail it.
	decodeStart := time.Now()
	var decoded any
	if err := json.Unmarshal(bigContents, &decoded); err != nil {
		t.Fatal(err)
	}
	contentsBound := max(2*time.Second, 4*time.Since(decodeStart))
	bios := func(prio int, args map[string]any) []steps.Step {
		return []steps.Step{{Interface: "bios", Name: "apply_configuration", Priority: prio, Args: args}}
	}
	settings := map[string]any{"settings": []any{}}
	cases := []struct {
		name   string
		direct bool // the request goes to the direct node (Deploy only)
		opts   conductor.DeployOptions
		field  string
		cause  error // a sentinel the error must also match, if any
	}{
		{name: "unknown step interface", field: "deploy_steps",
			opts: conductor.DeployOptions{DeploySteps: []steps.Step{{Interface: "frobnicate", Name: "x", Priority: 10, Args: map[string]any{}}}}},
		{name: "unknown step name", field: "deploy_steps",
			opts: conductor.DeployOptions{DeploySteps: []steps.Step{{Interface: "bios", Name: "no_such_step", Priority: 10, Args: map[string]any{}}}}},
		{name: "empty step name", field: "deploy_steps",
			opts: conductor.DeployOptions{DeploySteps: []steps.Step{{Interface: "bios", Priority: 10}}}},
		{name: "priority -1", field: "deploy_steps", opts: conductor.DeployOptions{DeploySteps: bios(-1, settings)}},
		{name: "missing required argument", field: "deploy_steps", opts: conductor.DeployOptions{DeploySteps: bios(10, map[string]any{})}},
		{name: "unexpected argument", field: "deploy_steps",
			opts: conductor.DeployOptions{DeploySteps: bios(10, map[string]any{"settings": []any{}, "frob": true})}},
		{name: "wait seconds of the wrong type", field: "deploy_steps",
			opts: conductor.DeployOptions{DeploySteps: []steps.Step{{Interface: "deploy", Name: "wait", Priority: 10, Args: map[string]any{"seconds": "ten"}}}}},
		{name: "negative wait seconds", field: "deploy_steps",
			opts: conductor.DeployOptions{DeploySteps: []steps.Step{{Interface: "deploy", Name: "wait", Priority: 10, Args: map[string]any{"seconds": -3}}}}},
		{name: "argument that is no JSON value", field: "deploy_steps", opts: conductor.DeployOptions{DeploySteps: bios(10, map[string]any{"settings": func() {}})}},
		{name: "core step overridden", field: "deploy_steps",
			opts: conductor.DeployOptions{DeploySteps: []steps.Step{{Interface: "deploy", Name: "deploy", Priority: 50, Args: map[string]any{}}}}},
		{name: "direct without image_source", direct: true, field: "instance_info.image_source", cause: driver.ErrMissingParameter},
		{name: "config drive file URL", field: "configdrive", cause: configdrive.ErrInvalid,
			opts: conductor.DeployOptions{ConfigDrive: json.RawMessage(`"file:///etc/passwd"`)}},
		{name: "config drive gopher URL", field: "configdrive", cause: configdrive.ErrInvalid,
			opts: conductor.DeployOptions{ConfigDrive: json.RawMessage(`"gopher://10.0.0.1/cd"`)}},
		{name: "config drive neither image nor URL", field: "configdrive", cause: configdrive.ErrInvalid,
			opts: conductor.DeployOptions{ConfigDrive: json.RawMessage(`"not base64!"`)}},
		{name: "config drive image over 64 MiB", field: "configdrive", cause: configdrive.ErrTooLarge,
			opts: conductor.DeployOptions{ConfigDrive: gzipped(configdrive.MaxSize + 1)}},
		{name: "config drive contents over 64 MiB", field: "configdrive", cause: configdrive.ErrTooLarge,
			opts: conductor.DeployOptions{ConfigDrive: bigContents}},
	}
	verbs := []struct {
		name string
		call func(ident string, o conductor.DeployOptions) error
		node *baremetal.Node
	}{
		{"deploy", func(id string, o conductor.DeployOptions) error { return h.c.Deploy(h.ctx, id, o) }, fakeNode},
		{"rebuild", func(id string, o conductor.DeployOptions) error { return h.c.Rebuild(h.ctx, id, o) }, activeNode},
	}
	for _, v := range verbs {
		for _, tc := range cases {
			if tc.direct && v.name != "deploy" {
				continue
			}
			t.Run(v.name+"/"+tc.name, func(t *testing.T) {
				uuid := v.node.UUID
				if tc.direct {
					uuid = directNode.UUID
				}
				before, err := h.store.GetNode(h.ctx, uuid)
				if err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				err = v.call(uuid, tc.opts)
				took := time.Since(start)
				var ife *baremetal.InvalidFieldError
				if !errors.As(err, &ife) || !errors.Is(err, baremetal.ErrInvalidInput) {
					t.Fatalf("%s = %v, want an *InvalidFieldError", v.name, err)
				}
				if ife.Ident != uuid || ife.Field != tc.field || ife.Expected == "" {
					t.Fatalf("error names node %q field %q expected %q; want node %s field %s", ife.Ident, ife.Field, ife.Expected, uuid, tc.field)
				}
				if tc.cause != nil && !errors.Is(err, tc.cause) {
					t.Fatalf("error %v does not match %v", err, tc.cause)
				}
				after, err := h.store.GetNode(h.ctx, uuid)
				if err != nil {
					t.Fatal(err)
				}
				if d := storetest.DiffNodes(before, after); d != "" || after.Reservation != "" {
					t.Fatalf("refused %s changed the node (reservation %q):\n%s", v.name, after.Reservation, d)
				}
				if tc.cause == configdrive.ErrTooLarge {
					t.Logf("%s refused in %v", tc.name, took)
					// The image case must decompress 64 MiB to know; the
					// contents case is a byte scan and must stay fast.
					if tc.name == "config drive contents over 64 MiB" && took > contentsBound {
						t.Fatalf("refusing the oversized config drive took %v (bound %v: four decodes of it here)", took, contentsBound)
					}
				}
			})
		}
	}
	// The same node still deploys with a good request afterwards.
	h.must(h.c.Deploy(h.ctx, fakeNode.UUID, conductor.DeployOptions{
		DeploySteps: bios(10, settings), ConfigDrive: json.RawMessage(`"https://10.0.0.1/cd.iso"`)}))
	h.waitFor(fakeNode.UUID, statemachine.Active)
}

// TestCleanAndServiceRefusalsAreTyped checks the validation Deploy now
// shares with Clean and Service refuses the same way for all three: an
// *InvalidFieldError naming the node and the steps field, wrapping the
// planner's *steps.ValidationError, with the node unchanged.
func TestCleanAndServiceRefusalsAreTyped(t *testing.T) {
	t.Parallel()
	store := openStore(t, false)
	h := newHarness(t, store, fake.Config{}, conductor.Options{DisableAutomatedClean: true})
	n := h.enroll("typed-refusal", nil)
	h.must(h.c.Manage(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Manageable)
	bad := []steps.Step{{Interface: "bios", Name: "no_such_step", Args: map[string]any{}}}
	check := func(verb, field string, call func() error) {
		t.Helper()
		before, gerr := store.GetNode(h.ctx, n.UUID)
		if gerr != nil {
			t.Fatal(gerr)
		}
		err := call()
		var ife *baremetal.InvalidFieldError
		var ve *steps.ValidationError
		if !errors.As(err, &ife) || ife.Field != field || ife.Ident != n.UUID || !errors.As(err, &ve) {
			t.Fatalf("%s = %v, want an *InvalidFieldError on %s wrapping a *steps.ValidationError", verb, err, field)
		}
		after, gerr := store.GetNode(h.ctx, n.UUID)
		if gerr != nil {
			t.Fatal(gerr)
		}
		if d := storetest.DiffNodes(before, after); d != "" || after.Reservation != "" {
			t.Fatalf("refused %s changed the node:\n%s", verb, d)
		}
	}
	// A manual clean is accepted, as Ironic's API answers 202, and its
	// steps are validated by the worker: the clean fails with the
	// planner's words in last_error, and the node can be cleaned again.
	h.must(h.c.Clean(h.ctx, n.UUID, bad, conductor.CleanOptions{}))
	h.waitFor(n.UUID, statemachine.CleanFailed)
	failed, err := store.GetNode(h.ctx, n.UUID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(failed.LastError, "Cannot clean node "+n.UUID) || !strings.Contains(failed.LastError, "no_such_step") || failed.Reservation != "" {
		t.Fatalf("clean with an unknown step: last_error %q, reservation %q", failed.LastError, failed.Reservation)
	}
	h.must(h.c.Manage(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Manageable)
	h.must(h.c.Provide(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Available)
	h.must(h.c.Deploy(h.ctx, n.UUID, conductor.DeployOptions{}))
	h.waitFor(n.UUID, statemachine.Active)
	check("service", "service_steps", func() error { return h.c.Service(h.ctx, n.UUID, bad, conductor.ServiceOptions{}) })
}
