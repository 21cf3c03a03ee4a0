package ironicapi_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/allocations"
	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
)

func TestAllocationsThroughGophercloud(t *testing.T) {
	l := newLab(t)
	ctx := context.Background()
	sc := l.client(t, "1.60")
	gpu := l.availableNode(t, "gpu-1", func(n *baremetal.Node) { n.ResourceClass, n.Traits = "baremetal", []string{"CUSTOM_GPU"} })
	plain := l.availableNode(t, "plain-1", func(n *baremetal.Node) { n.ResourceClass = "baremetal" })

	a, err := allocations.Create(ctx, sc, allocations.CreateOpts{ResourceClass: "baremetal", Traits: []string{"CUSTOM_GPU"},
		Name: "web-1", Extra: map[string]string{"k": "v"}}).Extract()
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	// As Ironic's: created allocating, processed in the background.
	if a.State != "allocating" || a.NodeUUID != "" || a.LastError != "" {
		t.Fatalf("created allocation = %+v; want allocating without a node", a)
	}
	a = allocationSettled(t, sc, a.UUID)
	if a.State != "active" || a.NodeUUID != gpu.UUID || a.LastError != "" || a.Extra["k"] != "v" || len(a.Links) != 2 {
		t.Fatalf("allocation = %+v; want active on the GPU node %s", a, gpu.UUID)
	}
	node, err := nodes.Get(ctx, sc, gpu.UUID).Extract()
	if err != nil || node.InstanceUUID != a.UUID || node.AllocationUUID != a.UUID {
		t.Fatalf("allocated node instance %q allocation %q, %v; want %s", node.InstanceUUID, node.AllocationUUID, err, a.UUID)
	}
	failed, err := allocations.Create(ctx, sc, allocations.CreateOpts{ResourceClass: "baremetal", Traits: []string{"CUSTOM_GPU"}}).Extract()
	if err == nil {
		failed = allocationSettled(t, sc, failed.UUID)
	}
	if err != nil || failed.State != "error" || failed.NodeUUID != "" || failed.LastError != "no suitable nodes have the requested traits CUSTOM_GPU" {
		t.Fatalf("second GPU allocation = %+v, %v; want error with Ironic's last_error", failed, err)
	}

	for _, tc := range []struct {
		name string
		opts allocations.ListOpts
		want []string
	}{
		{"all", allocations.ListOpts{}, []string{a.UUID, failed.UUID}},
		{"node by name", allocations.ListOpts{Node: "gpu-1"}, []string{a.UUID}},
		{"state", allocations.ListOpts{State: allocations.AllocationState(allocations.Error)}, []string{failed.UUID}},
		{"resource class", allocations.ListOpts{ResourceClass: "other"}, nil},
		{"page", allocations.ListOpts{Limit: 1}, []string{a.UUID, failed.UUID}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pages, err := allocations.List(sc, tc.opts).AllPages(ctx)
			if err != nil {
				t.Fatal(err)
			}
			list, err := allocations.ExtractAllocations(pages)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, x := range list {
				got = append(got, x.UUID)
			}
			if len(got) != len(tc.want) || (len(got) > 0 && got[0] != tc.want[0]) {
				t.Fatalf("List(%+v) = %v, want %v", tc.opts, got, tc.want)
			}
		})
	}

	base := l.srv.URL + "/v1/"
	status, _, body := do(t, "GET", base+"allocations", "1.51", "")
	wantRaw(t, "allocations at 1.51", status, http.StatusNotFound, body, "")
	status, _, body = do(t, "GET", base+"allocations?owner=p", "1.59", "")
	wantRaw(t, "owner filter at 1.59", status, http.StatusNotAcceptable, body, "")
	status, _, body = do(t, "GET", base+"allocations/web-1", "1.52", "")
	if v := bodyMap(t, body); status != http.StatusOK || v["uuid"] != a.UUID {
		t.Fatalf("GET by name = %d %s", status, body)
	} else if _, has := v["owner"]; has {
		t.Fatalf("owner shown at 1.52: %s", body)
	}
	status, hdr, body := do(t, "POST", base+"allocations", "1.52", `{"resource_class":"baremetal","name":"plain"}`)
	if v := bodyMap(t, body); status != http.StatusCreated || v["state"] != "allocating" || hdr.Get("Location") != base+"allocations/"+v["uuid"].(string) {
		t.Fatalf("POST = %d %s (Location %q)", status, body, hdr.Get("Location"))
	} else if got := allocationSettled(t, sc, v["uuid"].(string)); got.NodeUUID != plain.UUID {
		t.Fatalf("POST's allocation settled as %+v; want on %s", got, plain.UUID)
	}
	status, _, body = do(t, "POST", base+"allocations", "1.52", `{"name":"x"}`)
	wantRaw(t, "POST without resource_class", status, http.StatusBadRequest, body, "resource_class")
	status, _, body = do(t, "POST", base+"allocations", "1.52", `{"resource_class":"baremetal","name":"web-1"}`)
	wantRaw(t, "POST duplicate name", status, http.StatusConflict, body, "web-1")
	status, _, body = do(t, "POST", base+"allocations", "1.57", `{"node":"gpu-1"}`)
	wantRaw(t, "backfill at 1.57", status, http.StatusNotAcceptable, body, "")

	// PATCH: name and extra only, from 1.57.
	status, _, body = do(t, "PATCH", base+"allocations/web-1", "1.56", `[{"op":"replace","path":"/name","value":"web-2"}]`)
	wantRaw(t, "PATCH at 1.56", status, http.StatusNotFound, body, "")
	status, _, body = do(t, "PATCH", base+"allocations/web-1", "1.57", `[{"op":"replace","path":"/name","value":"web-2"},{"op":"add","path":"/extra/x","value":"y"}]`)
	if v := bodyMap(t, body); status != http.StatusOK || v["name"] != "web-2" || v["extra"].(map[string]any)["x"] != "y" {
		t.Fatalf("PATCH = %d %s", status, body)
	}
	status, _, body = do(t, "PATCH", base+"allocations/web-2", "1.57", `[{"op":"replace","path":"/resource_class","value":"x"}]`)
	wantRaw(t, "PATCH resource_class", status, http.StatusBadRequest, body, "internal attribute")

	// The node's allocation sub-resource.
	status, _, body = do(t, "GET", base+"nodes/gpu-1/allocation", "1.52", "")
	if v := bodyMap(t, body); status != http.StatusOK || v["uuid"] != a.UUID {
		t.Fatalf("GET node allocation = %d %s", status, body)
	}
	status, _, body = do(t, "DELETE", base+"nodes/gpu-1/allocation", "1.52", "")
	if status != http.StatusNoContent {
		t.Fatalf("DELETE node allocation = %d %s", status, body)
	}
	status, _, body = do(t, "GET", base+"nodes/gpu-1/allocation", "1.52", "")
	wantRaw(t, "GET freed node's allocation", status, http.StatusNotFound, body, "")
	if n, _ := nodes.Get(ctx, sc, gpu.UUID).Extract(); n.InstanceUUID != "" || n.AllocationUUID != "" {
		t.Fatalf("freed node bound to %q/%q", n.InstanceUUID, n.AllocationUUID)
	}

	// Backfilling (1.58) an active node; its allocation then stays.
	l.deployed(t, gpu.UUID)
	b, err := allocations.Create(ctx, l.client(t, "1.58"), backfillOpts{Node: "gpu-1"}).Extract()
	if err != nil || b.State != "active" || b.NodeUUID != gpu.UUID || b.ResourceClass != "baremetal" {
		t.Fatalf("backfill = %+v, %v", b, err)
	}
	status, _, body = do(t, "DELETE", base+"allocations/"+b.UUID, "1.58", "")
	wantRaw(t, "DELETE active node's allocation", status, http.StatusConflict, body, "the node is active")
	status, _, body = do(t, "POST", base+"allocations", "1.58", `{"node":"plain-1","resource_class":"baremetal"}`)
	wantRaw(t, "backfill of an available node", status, http.StatusBadRequest, body, `Node must be in the "active" state`)

	if err := allocations.Delete(ctx, sc, failed.UUID).ExtractErr(); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := allocations.Get(ctx, sc, failed.UUID).Extract(); err == nil {
		t.Fatal("Get after Delete succeeded")
	}
	nodesReserved, err := l.c.Store().ListNodes(ctx, baremetal.NodeFilter{Reserved: new(true)}, baremetal.Page{})
	if err != nil || len(nodesReserved) != 0 {
		t.Fatalf("reserved nodes: %d, %v", len(nodesReserved), err)
	}
}

// allocationSettled polls allocation uuid until it leaves allocating.
func allocationSettled(t *testing.T, sc *gophercloud.ServiceClient, uuid string) *allocations.Allocation {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		a, err := allocations.Get(context.Background(), sc, uuid).Extract()
		if err != nil {
			t.Fatalf("Get allocation %s: %v", uuid, err)
		}
		if a.State != "allocating" {
			return a
		}
		if time.Now().After(deadline) {
			t.Fatalf("allocation %s still allocating after 30 s", uuid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// backfillOpts is an allocation create body naming a node (gophercloud's
// CreateOpts requires a resource class).
type backfillOpts struct {
	Node string `json:"node"`
}

func (o backfillOpts) ToAllocationCreateMap() (map[string]any, error) {
	return map[string]any{"node": o.Node}, nil
}
