package ironicapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/runbooks"
)

func TestRunbooksThroughGophercloud(t *testing.T) {
	l := newLab(t)
	ctx := context.Background()
	sc := l.client(t, "1.92")
	yes := true
	rb, err := runbooks.Create(ctx, sc, runbooks.CreateOpts{Name: "CUSTOM_FIRMWARE", DisableRamdisk: &yes, Extra: map[string]any{"k": "v"},
		Steps: []runbooks.Step{
			{Interface: nodes.InterfaceBIOS, Step: "factory_reset", Args: map[string]any{}, Order: 2},
			{Interface: nodes.InterfaceBIOS, Step: "apply_configuration", Args: map[string]any{"settings": []any{}}, Order: 1},
		}}).Extract()
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if rb.Name != "CUSTOM_FIRMWARE" || !rb.DisableRamdisk || rb.Public || len(rb.Steps) != 2 || rb.Steps[0].Step != "apply_configuration" || rb.Extra["k"] != "v" {
		t.Fatalf("created runbook = %+v; want its steps in order", rb)
	}
	got, err := runbooks.Get(ctx, sc, "CUSTOM_FIRMWARE").Extract()
	if err != nil || got.UUID != rb.UUID {
		t.Fatalf("Get by name = %+v, %v", got, err)
	}
	pages, err := runbooks.List(sc, nil).AllPages(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if list, err := runbooks.ExtractRunbooks(pages); err != nil || len(list) != 1 || list[0].UUID != rb.UUID {
		t.Fatalf("List = %v, %v", list, err)
	}
	updated, err := runbooks.Update(ctx, sc, rb.UUID, runbooks.UpdateOpts{
		runbooks.UpdateOperation{Op: runbooks.ReplaceOp, Path: "/name", Value: "CUSTOM_FW2"},
		runbooks.UpdateOperation{Op: runbooks.ReplaceOp, Path: "/steps/0/order", Value: 3},
	}).Extract()
	if err != nil || updated.Name != "CUSTOM_FW2" || updated.Steps[0].Step != "factory_reset" || updated.Steps[1].Order != 3 {
		t.Fatalf("Update = %+v, %v; want the new name and the steps reordered", updated, err)
	}

	base := l.srv.URL + "/v1/"
	status, _, body := do(t, "GET", base+"runbooks", "1.91", "")
	wantRaw(t, "runbooks at 1.91", status, http.StatusNotFound, body, "")
	for _, tc := range []struct {
		name, body string
		status     int
		text       string
	}{
		{"duplicate", `{"name":"CUSTOM_FW2","steps":[{"interface":"bios","step":"x","args":{},"order":0}]}`, http.StatusConflict, "CUSTOM_FW2"},
		{"not a trait", `{"name":"fw","steps":[{"interface":"bios","step":"x","args":{},"order":0}]}`, http.StatusBadRequest, "name"},
		{"no order", `{"name":"CUSTOM_X","steps":[{"interface":"bios","step":"x","args":{}}]}`, http.StatusBadRequest, "order"},
		{"same order", `{"name":"CUSTOM_X","steps":[{"interface":"bios","step":"x","args":{},"order":0},{"interface":"bios","step":"y","args":{},"order":0}]}`, http.StatusBadRequest, "steps"},
		{"bad interface", `{"name":"CUSTOM_X","steps":[{"interface":"nope","step":"x","args":{},"order":0}]}`, http.StatusBadRequest, "interface"},
		{"no steps", `{"name":"CUSTOM_X"}`, http.StatusBadRequest, "steps"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := do(t, "POST", base+"runbooks", "1.92", tc.body)
			wantRaw(t, "POST "+tc.name, status, tc.status, body, tc.text)
		})
	}
	status, _, body = do(t, "GET", base+"runbooks", "1.92", "")
	if list := bodyMap(t, body)["runbooks"].([]any); status != http.StatusOK || len(list) != 1 || keys(list[0].(map[string]any)) != "links,name,uuid" {
		t.Fatalf("list = %d %s; want Ironic's default fields", status, body)
	}

	if err := runbooks.Delete(ctx, sc, rb.UUID).ExtractErr(); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := runbooks.Get(ctx, sc, rb.UUID).Extract(); err == nil {
		t.Fatal("Get after Delete succeeded")
	}
}

// A manual clean names a stored runbook (1.92) instead of clean_steps;
// the node carries the runbook's name as a trait, as Ironic requires.
func TestCleanWithRunbookThroughTheProvisionAPI(t *testing.T) {
	l := newLab(t)
	ctx := context.Background()
	sc := l.client(t, "1.92")
	if _, err := runbooks.Create(ctx, sc, runbooks.CreateOpts{Name: "CUSTOM_RESET", Steps: []runbooks.Step{
		{Interface: nodes.InterfaceBIOS, Step: "factory_reset", Args: map[string]any{}, Order: 1},
	}}).Extract(); err != nil {
		t.Fatal(err)
	}
	n, err := nodes.Create(ctx, sc, nodes.CreateOpts{Driver: "fake-hardware", Name: "rb-node"}).Extract()
	if err != nil {
		t.Fatal(err)
	}
	base := l.srv.URL + "/v1/nodes/" + n.UUID
	wait := func(state string) {
		t.Helper()
		for i := 0; i < 200; i++ {
			got, err := nodes.Get(ctx, sc, n.UUID).Extract()
			if err != nil {
				t.Fatal(err)
			}
			if got.ProvisionState == state && got.TargetProvisionState == "" {
				return
			}
			if strings.Contains(got.ProvisionState, "failed") {
				t.Fatalf("node %s: %s", got.ProvisionState, got.LastError)
			}
			time.Sleep(25 * time.Millisecond)
		}
		t.Fatalf("node never reached %s", state)
	}
	st, _, body := do(t, "PUT", base+"/states/provision", "1.92", `{"target":"manage"}`)
	wantRaw(t, "manage", st, http.StatusAccepted, body, "")
	wait("manageable")
	// Without the trait the conductor refuses the runbook.
	st, _, body = do(t, "PUT", base+"/states/provision", "1.92", `{"target":"clean","runbook":"CUSTOM_RESET"}`)
	if st != http.StatusBadRequest {
		t.Fatalf("runbook without the trait: %d %s", st, body)
	}
	st, _, body = do(t, "PUT", base+"/traits/CUSTOM_RESET", "1.92", "")
	wantRaw(t, "trait", st, http.StatusNoContent, body, "")
	st, _, body = do(t, "PUT", base+"/states/provision", "1.92", `{"target":"provide","runbook":"CUSTOM_RESET"}`)
	wantRaw(t, "runbook with provide", st, http.StatusBadRequest, body, "only valid when setting target provision state to clean or service")
	st, _, body = do(t, "PUT", base+"/states/provision", "1.92", `{"target":"clean","runbook":"CUSTOM_RESET"}`)
	wantRaw(t, "clean with runbook", st, http.StatusAccepted, body, "")
	wait("manageable")
}
