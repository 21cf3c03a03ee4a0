package storetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
)

// unknownNode is a well-formed UUID no test creates.
const unknownNode = "99999999-0000-4000-8000-000000000000"

// wantNotRecorded checks err is an *InventoryNotRecordedError naming
// node and matching ErrNotFound.
func wantNotRecorded(t *testing.T, err error, node string) {
	t.Helper()
	var nr *baremetal.InventoryNotRecordedError
	if !errors.As(err, &nr) || !strings.EqualFold(nr.Node, node) || !errors.Is(err, baremetal.ErrNotFound) {
		t.Fatalf("inventory of node %s = %v (%T), want an InventoryNotRecordedError naming it that matches ErrNotFound", node, err, err)
	}
	if !strings.Contains(err.Error(), node) {
		t.Fatalf("error %q does not name node %s", err, node)
	}
}

// wantNodeNotFound checks err is a *NotFoundError for a node, not an
// InventoryNotRecordedError.
func wantNodeNotFound(t *testing.T, err error, what string) {
	t.Helper()
	var nf *baremetal.NotFoundError
	if !errors.As(err, &nf) || nf.Kind != "node" {
		t.Fatalf("%s = %v (%T), want a node NotFoundError", what, err, err)
	}
}

func mustSaveInventory(t *testing.T, s baremetal.Store, node string, inv *baremetal.NodeInventory) {
	t.Helper()
	if err := s.SaveNodeInventory(ctx(t), node, inv); err != nil {
		t.Fatalf("SaveNodeInventory(%s): %v", node, err)
	}
}

func mustGetInventory(t *testing.T, s baremetal.Store, node string) *baremetal.NodeInventory {
	t.Helper()
	got, err := s.GetNodeInventory(ctx(t), node)
	if err != nil {
		t.Fatalf("GetNodeInventory(%s): %v", node, err)
	}
	return got
}

// testInventory covers the inventory contract: not recorded before the
// first save, saved and read back byte for byte, replaced with
// created_at kept, unknown nodes, bad documents refused without writing,
// one inventory per node, deleted with the node.
func testInventory(t *testing.T, s baremetal.Store, clock *ManualClock) {
	n := mustNode(t, s, nil)
	other := mustNode(t, s, nil)

	_, err := s.GetNodeInventory(ctx(t), n.UUID)
	wantNotRecorded(t, err, n.UUID)

	first := &baremetal.NodeInventory{
		Inventory:  json.RawMessage(`{"cpu": {"count": 4, "architecture": "x86_64"}, "memory": {"physical_mb": 8192}}`),
		PluginData: json.RawMessage(`{"boot_interface": "52:54:00:00:00:01"}`),
	}
	mustSaveInventory(t, s, n.UUID, first)
	if !first.CreatedAt.Equal(clock.Now()) || !first.UpdatedAt.Equal(clock.Now()) {
		t.Fatalf("saved inventory stamped created %v updated %v, want both %v", first.CreatedAt, first.UpdatedAt, clock.Now())
	}
	got := mustGetInventory(t, s, n.UUID)
	if !bytes.Equal(got.Inventory, first.Inventory) || !bytes.Equal(got.PluginData, first.PluginData) {
		t.Fatalf("inventory read back = %s / %s, want %s / %s", got.Inventory, got.PluginData, first.Inventory, first.PluginData)
	}
	if !got.CreatedAt.Equal(first.CreatedAt) || !got.UpdatedAt.Equal(first.UpdatedAt) {
		t.Fatalf("inventory read back stamped %v / %v, want %v / %v", got.CreatedAt, got.UpdatedAt, first.CreatedAt, first.UpdatedAt)
	}
	// The upper-case form of the UUID names the same node.
	if up := mustGetInventory(t, s, strings.ToUpper(n.UUID)); !bytes.Equal(up.Inventory, first.Inventory) {
		t.Fatalf("inventory by upper-case UUID = %s", up.Inventory)
	}
	_, err = s.GetNodeInventory(ctx(t), other.UUID)
	wantNotRecorded(t, err, other.UUID)

	// A later inspection replaces it; created_at is the first save's.
	clock.Advance(time.Hour)
	second := &baremetal.NodeInventory{Inventory: json.RawMessage(`{"cpu": {"count": 8}}`)}
	mustSaveInventory(t, s, n.UUID, second)
	got = mustGetInventory(t, s, n.UUID)
	if !bytes.Equal(got.Inventory, second.Inventory) {
		t.Fatalf("replaced inventory = %s, want %s", got.Inventory, second.Inventory)
	}
	if string(got.PluginData) != "{}" {
		t.Fatalf("plugin data saved empty reads back as %q, want {}", got.PluginData)
	}
	if !got.CreatedAt.Equal(first.CreatedAt) || !got.UpdatedAt.Equal(clock.Now()) || !second.UpdatedAt.Equal(clock.Now()) || !second.CreatedAt.Equal(first.CreatedAt) {
		t.Fatalf("replaced inventory stamped created %v updated %v (filled %v / %v), want created %v updated %v",
			got.CreatedAt, got.UpdatedAt, second.CreatedAt, second.UpdatedAt, first.CreatedAt, clock.Now())
	}

	// Bad documents are refused naming the field, not quoting the value,
	// and leave the stored inventory alone.
	const marker = "do-not-echo-me"
	for _, tc := range []struct {
		name  string
		inv   *baremetal.NodeInventory
		field string
	}{
		{"nil", nil, "inventory"},
		{"empty inventory", &baremetal.NodeInventory{}, "inventory"},
		{"inventory not JSON", &baremetal.NodeInventory{Inventory: json.RawMessage(`{"cpu": "` + marker)}, "inventory"},
		{"inventory an array", &baremetal.NodeInventory{Inventory: json.RawMessage(`["` + marker + `"]`)}, "inventory"},
		{"inventory null", &baremetal.NodeInventory{Inventory: json.RawMessage(`null`)}, "inventory"},
		{"two objects", &baremetal.NodeInventory{Inventory: json.RawMessage(`{} {}`)}, "inventory"},
		{"plugin data a string", &baremetal.NodeInventory{Inventory: json.RawMessage(`{}`), PluginData: json.RawMessage(`"` + marker + `"`)}, "plugin_data"},
		{"plugin data not JSON", &baremetal.NodeInventory{Inventory: json.RawMessage(`{}`), PluginData: json.RawMessage(`{` + marker)}, "plugin_data"},
	} {
		err := s.SaveNodeInventory(ctx(t), n.UUID, tc.inv)
		wantField(t, err, tc.field)
		if strings.Contains(err.Error(), marker) || !strings.Contains(err.Error(), n.UUID) {
			t.Fatalf("%s: error %q quotes the document or does not name the node", tc.name, err)
		}
	}
	if got := mustGetInventory(t, s, n.UUID); !bytes.Equal(got.Inventory, second.Inventory) {
		t.Fatalf("refused saves changed the inventory to %s", got.Inventory)
	}

	// Unknown nodes.
	wantNodeNotFound(t, s.SaveNodeInventory(ctx(t), unknownNode, &baremetal.NodeInventory{Inventory: json.RawMessage(`{}`)}), "saving the inventory of an unknown node")
	_, err = s.GetNodeInventory(ctx(t), unknownNode)
	wantNodeNotFound(t, err, "inventory of an unknown node")
	_, err = s.GetNodeInventory(ctx(t), "not-a-uuid")
	wantNodeNotFound(t, err, "inventory of a malformed UUID")

	// A reserved node keeps its inventory when its delete is refused;
	// deleting it deletes the inventory, the other node's stays.
	mustSaveInventory(t, s, other.UUID, &baremetal.NodeInventory{Inventory: json.RawMessage(`{"other": true}`)})
	if _, err := s.ReserveNode(ctx(t), n.UUID, "host-a"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteNode(ctx(t), n.UUID); !errors.Is(err, baremetal.ErrNodeInUse) {
		t.Fatalf("deleting a reserved node = %v", err)
	}
	mustGetInventory(t, s, n.UUID)
	if err := s.ReleaseNode(ctx(t), n.UUID, "host-a"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteNode(ctx(t), n.UUID); err != nil {
		t.Fatal(err)
	}
	_, err = s.GetNodeInventory(ctx(t), n.UUID)
	wantNodeNotFound(t, err, "inventory of a deleted node")
	if got := mustGetInventory(t, s, other.UUID); string(got.Inventory) != `{"other": true}` {
		t.Fatalf("deleting a node changed another node's inventory: %s", got.Inventory)
	}
	// A node created with the deleted node's UUID starts without one.
	again := mustNode(t, s, func(x *baremetal.Node) { x.UUID = n.UUID })
	_, err = s.GetNodeInventory(ctx(t), again.UUID)
	wantNotRecorded(t, err, again.UUID)
}

// largeInventory returns a JSON object of at least size bytes with many
// disks and interfaces, strings with escapes and non-ASCII text, as a
// big machine's inventory with its plugin data logs would be.
func largeInventory(size int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"cpu": {"count": 256, "model_name": "Zen 4 \u00e9\u00e8 \"quoted\" \\ back"}, "disks": [`)
	for i := 0; b.Len() < size; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `{"name": "/dev/nvme%dn1", "size": %d, "serial": "S%08X", "model": "disk \u2603 \t%d", "rotational": false}`, i, int64(i+1)<<30, i, i)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// testInventoryLarge round-trips a ~1 MiB inventory and plugin data
// byte for byte.
func testInventoryLarge(t *testing.T, s baremetal.Store, _ *ManualClock) {
	n := mustNode(t, s, nil)
	inv := largeInventory(1 << 20)
	plugin := []byte(`{"logs": "` + strings.Repeat("a", 256<<10) + `", "boot_interface": "52:54:00:00:00:02"}`)
	if !json.Valid(inv) || !json.Valid(plugin) {
		t.Fatal("test documents are not valid JSON")
	}
	mustSaveInventory(t, s, n.UUID, &baremetal.NodeInventory{Inventory: inv, PluginData: plugin})
	got := mustGetInventory(t, s, n.UUID)
	if !bytes.Equal(got.Inventory, inv) || !bytes.Equal(got.PluginData, plugin) {
		t.Fatalf("large inventory round trip: got %d / %d bytes, want %d / %d, equal %v / %v",
			len(got.Inventory), len(got.PluginData), len(inv), len(plugin), bytes.Equal(got.Inventory, inv), bytes.Equal(got.PluginData, plugin))
	}
	// Replacing a large one with a small one leaves nothing of the old.
	mustSaveInventory(t, s, n.UUID, &baremetal.NodeInventory{Inventory: json.RawMessage(`{"small": 1}`)})
	if got := mustGetInventory(t, s, n.UUID); string(got.Inventory) != `{"small": 1}` || string(got.PluginData) != "{}" {
		t.Fatalf("after replacing the large inventory: %d / %d bytes", len(got.Inventory), len(got.PluginData))
	}
}

// testInventoryConcurrentSaves saves inventories of one node from many
// goroutines at once (the first save of a node races on the insert):
// every save succeeds and the node ends with exactly one of them.
func testInventoryConcurrentSaves(t *testing.T, s baremetal.Store, _ *ManualClock) {
	n := mustNode(t, s, nil)
	const writers = 8
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.SaveNodeInventory(ctx(t), n.UUID, &baremetal.NodeInventory{
				Inventory: json.RawMessage(fmt.Sprintf(`{"writer": %d}`, i)), PluginData: json.RawMessage(fmt.Sprintf(`{"writer": %d}`, i))})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("concurrent save %d: %v", i, err)
		}
	}
	got := mustGetInventory(t, s, n.UUID)
	var inv, plugin struct{ Writer *int }
	if err := json.Unmarshal(got.Inventory, &inv); err != nil || inv.Writer == nil {
		t.Fatalf("inventory after concurrent saves = %s, %v", got.Inventory, err)
	}
	if err := json.Unmarshal(got.PluginData, &plugin); err != nil || plugin.Writer == nil || *plugin.Writer != *inv.Writer {
		t.Fatalf("inventory and plugin data of different saves: %s / %s", got.Inventory, got.PluginData)
	}
}
