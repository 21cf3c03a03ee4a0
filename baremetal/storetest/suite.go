package storetest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/clock"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/statemachine"
)

// Factory returns a new, empty store that reads time from clock. It
// registers the store's cleanup with t.Cleanup.
type Factory func(t *testing.T, clock clock.Clock) baremetal.Store

// Epoch returns the time the suite's manual clocks start at.
func Epoch() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }

// Run runs the conformance suite: every behaviour the baremetal.Store
// contract promises, each subtest on a fresh store from newStore, the
// subtests in parallel.
func Run(t *testing.T, newStore Factory) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s baremetal.Store, clock *ManualClock)
	}{
		{"NodeCreateAndGet", testNodeCreateAndGet},
		{"NodeRoundTripsEveryField", testNodeRoundTrip},
		{"NodeBadInput", testNodeBadInput},
		{"NodeDuplicates", testNodeDuplicates},
		{"NodeBatchCreate", testNodeBatchCreate},
		{"NodeUpdateCompareAndSwap", testNodeUpdateCAS},
		{"NodeProvisionUpdatedAt", testProvisionUpdatedAt},
		{"NodeListFiltersAndPages", testListFilters},
		{"NodeDelete", testNodeDelete},
		{"Ports", testPorts},
		{"PortBadInput", testPortBadInput},
		{"QueryPorts", testQueryPorts},
		{"ListConductors", testListConductors},
		{"Lookup", testLookup},
		{"LookupManyAddresses", testLookupManyAddresses},
		{"Reservation", testReservation},
		{"AcquireNodeRetries", testAcquireNode},
		{"ReservationsOfConductor", testReservationsOf},
		{"ConductorRegistration", testConductorRegistration},
		{"ConductorLiveness", testConductorLiveness},
		{"BreakDeadReservations", testBreakDead},
		{"History", testHistory},
		{"HistoryFields", testHistoryFields},
		{"HistoryPages", testHistoryPages},
		{"UpdateRecordsHistory", testUpdateRecording},
		{"UpdateReleases", testUpdateReleasing},
		{"Inventory", testInventory},
		{"InventoryLarge", testInventoryLarge},
		{"InventoryConcurrentSaves", testInventoryConcurrentSaves},
		{"ChangeNotifier", testNotifier},
		{"SecretsNeverInErrors", testSecretsInErrors},
		{"ConcurrentReserveHasOneWinner", testConcurrentReserve},
		{"Portgroups", testPortgroups},
		{"Allocations", testAllocations},
		{"ConcurrentAllocationOfNode", testConcurrentAllocationOfNode},
		{"DeployTemplates", testDeployTemplates},
		{"Runbooks", testRunbooks},
		{"Chassis", testChassis},
		{"NodeChassis", testNodeChassis},
		{"VolumeConnectors", testVolumeConnectors},
		{"VolumeTargets", testVolumeTargets},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Every subtest has its own store, so they run in parallel;
			// for a networked database that hides the round trips.
			t.Parallel()
			clock := NewManualClock(Epoch())
			s := newStore(t, clock)
			tc.fn(t, s, clock)
		})
	}
}

// ctx returns a context bounded so a hung database fails the test instead
// of the whole run.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// mustNode creates a node with the given name and driver "fake-hardware".
func mustNode(t *testing.T, s baremetal.Store, mutate func(n *baremetal.Node)) *baremetal.Node {
	t.Helper()
	n := &baremetal.Node{Driver: "fake-hardware"}
	if mutate != nil {
		mutate(n)
	}
	if err := s.CreateNode(ctx(t), n); err != nil {
		t.Fatalf("CreateNode: %v", err)
	}
	return n
}

func count(t *testing.T, s baremetal.Store) int {
	t.Helper()
	n, err := s.CountNodes(ctx(t), baremetal.NodeFilter{})
	if err != nil {
		t.Fatalf("CountNodes: %v", err)
	}
	return n
}

// wantField checks err is an *InvalidFieldError (or, with dup, a
// *DuplicateError) naming field.
func wantField(t *testing.T, err error, field string) {
	t.Helper()
	var ife *baremetal.InvalidFieldError
	var de *baremetal.DuplicateError
	switch {
	case err == nil:
		t.Fatalf("want an error naming field %q, got nil", field)
	case errors.As(err, &ife):
		if ife.Field != field {
			t.Fatalf("error names field %q, want %q: %v", ife.Field, field, err)
		}
	case errors.As(err, &de):
		if de.Field != field {
			t.Fatalf("duplicate error names field %q, want %q: %v", de.Field, field, err)
		}
	default:
		t.Fatalf("want a typed field error for %q, got %T: %v", field, err, err)
	}
	if !errors.Is(err, baremetal.ErrInvalidInput) {
		t.Fatalf("error %v does not match ErrInvalidInput", err)
	}
	if !strings.Contains(err.Error(), field) {
		t.Fatalf("error text %q does not name field %q", err.Error(), field)
	}
}

func testNodeCreateAndGet(t *testing.T, s baremetal.Store, clock *ManualClock) {
	n := mustNode(t, s, func(n *baremetal.Node) { n.Name = "node-0" })
	if n.UUID == "" || n.ID == 0 {
		t.Fatalf("store did not assign UUID/ID: %+v", n)
	}
	if n.ProvisionState != "enroll" || n.Version != 1 {
		t.Fatalf("new node: provision_state %q version %d, want enroll 1", n.ProvisionState, n.Version)
	}
	if !n.CreatedAt.Equal(clock.Now()) || !n.ProvisionUpdatedAt.Equal(clock.Now()) {
		t.Fatalf("timestamps %v / %v, want the clock's %v", n.CreatedAt, n.ProvisionUpdatedAt, clock.Now())
	}
	byUUID, err := s.GetNode(ctx(t), n.UUID)
	if err != nil {
		t.Fatalf("GetNode(uuid): %v", err)
	}
	byName, err := s.GetNode(ctx(t), "node-0")
	if err != nil {
		t.Fatalf("GetNode(name): %v", err)
	}
	if byUUID.ID != n.ID || byName.ID != n.ID || byUUID.UUID != n.UUID {
		t.Fatalf("GetNode returned another node: %v / %v", byUUID, byName)
	}
	byUpper, err := s.GetNode(ctx(t), strings.ToUpper(n.UUID))
	if err != nil || byUpper.ID != n.ID {
		t.Fatalf("GetNode(upper-case UUID) = %v, %v", byUpper, err)
	}
	_, err = s.GetNode(ctx(t), "no-such-node")
	var nf *baremetal.NotFoundError
	if !errors.As(err, &nf) || !errors.Is(err, baremetal.ErrNotFound) || nf.Ident != "no-such-node" {
		t.Fatalf("GetNode(unknown) = %v, want NotFoundError naming it", err)
	}
}

// fullNode returns a node with every field set to a non-zero value.
func fullNode() *baremetal.Node {
	yes, no := true, false
	return &baremetal.Node{
		UUID: "0b3f6a5e-1c2d-4e5f-8a9b-0c1d2e3f4a5b", Name: "full.node_1~x", InstanceUUID: "11111111-2222-4333-8444-555555555555",
		InstanceName: "web-1", Driver: "ipmi",
		BIOSInterface: "no-bios", BootInterface: "ipxe", ConsoleInterface: "no-console", DeployInterface: "direct",
		FirmwareInterface: "no-firmware", InspectInterface: "agent", ManagementInterface: "ipmitool",
		NetworkInterface: "noop", PowerInterface: "ipmitool", RAIDInterface: "agent", RescueInterface: "agent",
		StorageInterface: "noop", VendorInterface: "ipmitool",
		DriverInfo:         map[string]any{"ipmi_address": "10.0.0.1", "ipmi_password": "s3cret", "ipmi_port": float64(623)},
		DriverInternalInfo: map[string]any{driver.InternalAgentToken: "tok", "clean_steps": []any{map[string]any{"step": "erase_devices"}}},
		InstanceInfo:       map[string]any{"image_source": "http://img", "root_gb": float64(10)},
		Properties:         map[string]any{"cpu_arch": "x86_64", "memory_mb": float64(4096)},
		Extra:              map[string]any{"rack": "r1", "nested": map[string]any{"a": []any{"b", true, nil}}},
		CleanStep:          map[string]any{"interface": "deploy", "step": "erase_devices"},
		DeployStep:         map[string]any{"interface": "deploy", "step": "deploy"},
		ServiceStep:        map[string]any{"interface": "bios", "step": "apply"},
		RAIDConfig:         map[string]any{"logical_disks": []any{}},
		TargetRAIDConfig:   map[string]any{"logical_disks": []any{map[string]any{"size_gb": "MAX"}}},
		NetworkData:        map[string]any{"links": []any{}},
		PowerState:         "power on", TargetPowerState: "power off",
		ProvisionState: "manageable", TargetProvisionState: "available",
		Maintenance: true, MaintenanceReason: "broken fan", Fault: "power failure", ConsoleEnabled: true,
		LastError: "something failed", ConductorGroup: "rack-1", ConductorAffinity: 7,
		Traits: []string{"CUSTOM_GPU", "CUSTOM_FAST"}, ResourceClass: "baremetal.large",
		Owner: "project-a", Lessee: "project-b", Description: "a test node",
		Protected: true, ProtectedReason: "prod", Retired: true, RetiredReason: "old",
		AutomatedClean: &no, InspectionStartedAt: Epoch().Add(-2 * time.Hour), InspectionFinishedAt: Epoch().Add(-time.Hour),
		BootMode: "uefi", SecureBoot: &yes, Shard: "shard-1", ParentNode: "22222222-3333-4444-8555-666666666666",
		DisablePowerOff: true, Health: "OK", AllocationUUID: "33333333-4444-4555-8666-777777777777",
	}
}

func testNodeRoundTrip(t *testing.T, s baremetal.Store, clock *ManualClock) {
	want := fullNode()
	in := want.Clone()
	if err := s.CreateNode(ctx(t), in); err != nil {
		t.Fatalf("CreateNode: %v", err)
	}
	got, err := s.GetNode(ctx(t), want.UUID)
	if err != nil {
		t.Fatalf("GetNode: %v", err)
	}
	// Store-assigned fields.
	want.ID, want.CreatedAt, want.UpdatedAt, want.Version = got.ID, clock.Now(), clock.Now(), 1
	want.ProvisionUpdatedAt = clock.Now()
	if diff := DiffNodes(want, got); diff != "" {
		t.Fatalf("node did not round-trip:\n%s", diff)
	}
	if diff := DiffNodes(in, got); diff != "" {
		t.Fatalf("CreateNode filled the caller's node differently from the stored one:\n%s", diff)
	}
}

func testNodeBadInput(t *testing.T, s baremetal.Store, _ *ManualClock) {
	mustNode(t, s, func(n *baremetal.Node) { n.Name = "existing" })
	cases := []struct {
		field  string
		mutate func(n *baremetal.Node)
	}{
		{"uuid", func(n *baremetal.Node) { n.UUID = "not-a-uuid" }},
		{"name", func(n *baremetal.Node) { n.Name = "has space" }},
		{"name", func(n *baremetal.Node) { n.Name = "3f2b8c1e-0000-4000-8000-000000000000" }},
		{"name", func(n *baremetal.Node) { n.Name = strings.Repeat("n", 256) }},
		{"name", func(n *baremetal.Node) { n.Name = "." }},
		{"name", func(n *baremetal.Node) { n.Name = ".." }},
		{"name", func(n *baremetal.Node) { n.Name = "3F2B8C1E00004000800000000000000A" }},
		{"driver", func(n *baremetal.Node) { n.Driver = strings.Repeat("d", 256) }},
		{"provision_state", func(n *baremetal.Node) { n.ProvisionState = statemachine.State(strings.Repeat("s", 16)) }},
		{"resource_class", func(n *baremetal.Node) { n.ResourceClass = strings.Repeat("r", 81) }},
		{"instance_uuid", func(n *baremetal.Node) { n.InstanceUUID = "web-1" }},
		{"driver_info", func(n *baremetal.Node) {
			n.DriverInfo = map[string]any{"ipmi_password": "hunter2", "bad": math.Inf(1)}
		}},
		{"extra", func(n *baremetal.Node) { n.Extra = map[string]any{"f": func() {}} }},
		{"properties", func(n *baremetal.Node) { n.Properties = map[string]any{"c": make(chan int)} }},
		{"description", func(n *baremetal.Node) { n.Description = "bad \xff utf-8" }},
		{"last_error", func(n *baremetal.Node) { n.LastError = "nul \x00 byte" }},
		{"traits", func(n *baremetal.Node) { n.Traits = []string{""} }},
		{"reservation", func(n *baremetal.Node) { n.Reservation = "host-a" }},
		{"name", func(n *baremetal.Node) { n.Name = "existing" }},
	}
	for _, tc := range cases {
		before := count(t, s)
		n := &baremetal.Node{Driver: "fake-hardware"}
		tc.mutate(n)
		err := s.CreateNode(ctx(t), n)
		wantField(t, err, tc.field)
		if strings.Contains(err.Error(), "hunter2") {
			t.Fatalf("error text leaks a secret: %v", err)
		}
		if after := count(t, s); after != before {
			t.Fatalf("bad %s: store changed from %d to %d nodes", tc.field, before, after)
		}
	}
	// An update with bad input writes nothing either.
	n := mustNode(t, s, nil)
	bad := n.Clone()
	bad.Properties = map[string]any{"x": math.NaN()}
	wantField(t, s.UpdateNode(ctx(t), bad, ""), "properties")
	bad = n.Clone()
	bad.Name = "existing"
	wantField(t, s.UpdateNode(ctx(t), bad, ""), "name")
	got, err := s.GetNode(ctx(t), n.UUID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != n.Version || got.Name != "" || got.Properties != nil {
		t.Fatalf("refused update changed the node: %+v", got)
	}
}

func testNodeDuplicates(t *testing.T, s baremetal.Store, _ *ManualClock) {
	a := mustNode(t, s, func(n *baremetal.Node) {
		n.Name = "a"
		n.InstanceUUID = "aaaaaaaa-0000-4000-8000-000000000001"
		n.AllocationUUID = "aaaaaaaa-0000-4000-8000-0000000000a1"
	})
	for _, tc := range []struct {
		field string
		node  *baremetal.Node
	}{
		{"uuid", &baremetal.Node{UUID: strings.ToUpper(a.UUID)}},
		{"name", &baremetal.Node{Name: "a"}},
		{"instance_uuid", &baremetal.Node{InstanceUUID: a.InstanceUUID}},
		{"allocation_uuid", &baremetal.Node{AllocationUUID: a.AllocationUUID}},
	} {
		err := s.CreateNode(ctx(t), tc.node)
		wantField(t, err, tc.field)
		if !errors.Is(err, baremetal.ErrDuplicate) {
			t.Fatalf("duplicate %s: %v does not match ErrDuplicate", tc.field, err)
		}
	}
	if c := count(t, s); c != 1 {
		t.Fatalf("duplicates changed the store: %d nodes", c)
	}
}

func testNodeBatchCreate(t *testing.T, s baremetal.Store, _ *ManualClock) {
	batch := make([]*baremetal.Node, 450)
	for i := range batch {
		batch[i] = &baremetal.Node{Name: fmt.Sprintf("batch-%03d", i), Driver: "fake-hardware"}
	}
	if err := s.CreateNodes(ctx(t), batch); err != nil {
		t.Fatalf("CreateNodes: %v", err)
	}
	seen := map[int64]bool{}
	for _, n := range batch {
		if n.ID == 0 || n.UUID == "" || n.Version != 1 || seen[n.ID] {
			t.Fatalf("batch node not filled in: %v (id %d)", n, n.ID)
		}
		seen[n.ID] = true
		got, err := s.GetNode(ctx(t), n.Name)
		if err != nil || got.UUID != n.UUID || got.ID != n.ID {
			t.Fatalf("GetNode(%s) = %v, %v; want %s", n.Name, got, err, n.UUID)
		}
	}
	// All or nothing: a duplicate at the end (against the store) or
	// within the batch inserts nothing.
	before := count(t, s)
	again := []*baremetal.Node{{Name: "fresh-1"}, {Name: "fresh-2"}, {Name: "batch-449"}}
	wantField(t, s.CreateNodes(ctx(t), again), "name")
	if again[0].UUID != "" {
		t.Fatalf("failed batch changed the caller's nodes: %v", again[0])
	}
	within := []*baremetal.Node{{Name: "twin"}, {Name: "twin"}}
	wantField(t, s.CreateNodes(ctx(t), within), "name")
	if after := count(t, s); after != before {
		t.Fatalf("failed batches inserted %d nodes", after-before)
	}
}

func testNodeUpdateCAS(t *testing.T, s baremetal.Store, _ *ManualClock) {
	n := mustNode(t, s, nil)
	stale := n.Clone()

	n.Extra = map[string]any{"k": "v1"}
	if err := s.UpdateNode(ctx(t), n, ""); err != nil {
		t.Fatalf("UpdateNode: %v", err)
	}
	if n.Version != 2 {
		t.Fatalf("version after update = %d, want 2", n.Version)
	}
	// A writer holding an old version loses and writes nothing.
	stale.Extra = map[string]any{"k": "stale"}
	err := s.UpdateNode(ctx(t), stale, "")
	var ce *baremetal.ConflictError
	if !errors.As(err, &ce) || !errors.Is(err, baremetal.ErrConflict) || ce.Expected != 1 || ce.Actual != 2 {
		t.Fatalf("stale update = %v, want ConflictError 1 vs 2", err)
	}
	got, _ := s.GetNode(ctx(t), n.UUID)
	if got.Extra["k"] != "v1" || got.Version != 2 {
		t.Fatalf("stale update wrote: %+v", got)
	}
	// A writer claiming a reservation it does not hold loses.
	err = s.UpdateNode(ctx(t), n.Clone(), "host-a")
	if !errors.As(err, &ce) || ce.Holder != "host-a" || ce.ActualHolder != "" {
		t.Fatalf("update without the lock = %v, want ConflictError naming host-a", err)
	}
	if _, err := s.ReserveNode(ctx(t), n.UUID, "host-a"); err != nil {
		t.Fatal(err)
	}
	n.Extra["k"] = "v2"
	if err := s.UpdateNode(ctx(t), n, "host-a"); err != nil {
		t.Fatalf("update by the holder: %v", err)
	}
	// The lock is broken and taken by host-b: host-a's next write fails.
	if _, err := s.ReleaseReservationsOf(ctx(t), "host-a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReserveNode(ctx(t), n.UUID, "host-b"); err != nil {
		t.Fatal(err)
	}
	n.Extra["k"] = "fenced"
	err = s.UpdateNode(ctx(t), n.Clone(), "host-a")
	if !errors.As(err, &ce) || ce.ActualHolder != "host-b" {
		t.Fatalf("fenced writer = %v, want ConflictError naming host-b", err)
	}
	if !strings.Contains(err.Error(), "host-b") {
		t.Fatalf("conflict error %q does not name the holder", err)
	}
	got, _ = s.GetNode(ctx(t), n.UUID)
	if got.Extra["k"] != "v2" || got.Reservation != "host-b" {
		t.Fatalf("fenced write changed the node: %+v", got)
	}
	// Unknown node.
	ghost := n.Clone()
	ghost.UUID = "99999999-0000-4000-8000-000000000000"
	if err := s.UpdateNode(ctx(t), ghost, ""); !errors.Is(err, baremetal.ErrNotFound) {
		t.Fatalf("update of unknown node = %v, want ErrNotFound", err)
	}
	// UpdateNode never writes the reservation.
	n2, _ := s.GetNode(ctx(t), n.UUID)
	n2.Reservation = ""
	if err := s.UpdateNode(ctx(t), n2, "host-b"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetNode(ctx(t), n.UUID); got.Reservation != "host-b" {
		t.Fatalf("UpdateNode changed the reservation to %q", got.Reservation)
	}
}

func testProvisionUpdatedAt(t *testing.T, s baremetal.Store, clock *ManualClock) {
	n := mustNode(t, s, nil)
	created := n.ProvisionUpdatedAt
	clock.Advance(time.Minute)
	n.Extra = map[string]any{"a": "b"}
	if err := s.UpdateNode(ctx(t), n, ""); err != nil {
		t.Fatal(err)
	}
	if !n.ProvisionUpdatedAt.Equal(created) {
		t.Fatalf("a write without a state change moved provision_updated_at to %v", n.ProvisionUpdatedAt)
	}
	if !n.UpdatedAt.Equal(clock.Now()) {
		t.Fatalf("updated_at = %v, want %v", n.UpdatedAt, clock.Now())
	}
	clock.Advance(time.Minute)
	n.ProvisionState, n.TargetProvisionState = "verifying", "manageable"
	if err := s.UpdateNode(ctx(t), n, ""); err != nil {
		t.Fatal(err)
	}
	if !n.ProvisionUpdatedAt.Equal(clock.Now()) {
		t.Fatalf("state change stamped %v, want %v", n.ProvisionUpdatedAt, clock.Now())
	}
	stamped := n.ProvisionUpdatedAt
	// A heartbeat touch moves it forward without a version change.
	clock.Advance(time.Minute)
	v := n.Version
	if err := s.TouchProvisioning(ctx(t), n.UUID); err != nil {
		t.Fatal(err)
	}
	got, _ := s.GetNode(ctx(t), n.UUID)
	if !got.ProvisionUpdatedAt.Equal(clock.Now()) || got.Version != v {
		t.Fatalf("touch: provision_updated_at %v version %d, want %v %d", got.ProvisionUpdatedAt, got.Version, clock.Now(), v)
	}
	// A writer holding the older stamp does not move it back.
	n.Extra = map[string]any{"a": "c"}
	n.ProvisionUpdatedAt = stamped
	if err := s.UpdateNode(ctx(t), n, ""); err != nil {
		t.Fatal(err)
	}
	if !n.ProvisionUpdatedAt.Equal(clock.Now()) {
		t.Fatalf("stale stamp moved provision_updated_at back to %v", n.ProvisionUpdatedAt)
	}
	if err := s.TouchProvisioning(ctx(t), "99999999-0000-4000-8000-000000000000"); !errors.Is(err, baremetal.ErrNotFound) {
		t.Fatalf("touch unknown = %v", err)
	}
}

func testListFilters(t *testing.T, s baremetal.Store, clock *ManualClock) {
	states := []statemachine.State{"enroll", "manageable", "available", "active", "deploying", "wait call-back"}
	var all []*baremetal.Node
	for i := 0; i < 36; i++ {
		n := &baremetal.Node{
			Name: fmt.Sprintf("n%02d", i), ProvisionState: states[i%len(states)],
			Driver: []string{"ipmi", "redfish"}[i%2], ConductorGroup: []string{"", "rack-1", "rack-2"}[i%3],
			Maintenance: i%5 == 0, ConductorAffinity: int64(i % 4), ConsoleEnabled: i%7 == 1,
			ResourceClass: []string{"", "gold", "silver"}[i%3], Fault: []string{"", "power failure"}[min(i%6, 1)],
			Owner: []string{"", "proj-a", "proj-b"}[i%3], Lessee: []string{"proj-c", "", "proj-d", ""}[i%4],
			Shard: []string{"", "s1", "s2", "s3"}[i%4], Retired: i%9 == 2,
			Description:  []string{"", "rack 1 top", "rack 2 bottom", "spare"}[i%4],
			InstanceName: []string{"", "vm-a", "vm-b"}[i%3],
		}
		if i%5 == 3 {
			n.ParentNode = all[0].UUID
		}
		if i%4 == 0 {
			n.InstanceUUID = fmt.Sprintf("aaaaaaaa-0000-4000-8000-%012d", i)
		}
		if err := s.CreateNode(ctx(t), n); err != nil {
			t.Fatal(err)
		}
		all = append(all, n)
		clock.Advance(time.Second)
	}
	for i, n := range all {
		if i%3 == 0 {
			if _, err := s.ReserveNode(ctx(t), n.UUID, fmt.Sprintf("host-%d", i%2)); err != nil {
				t.Fatal(err)
			}
			n.Reservation = fmt.Sprintf("host-%d", i%2)
		}
	}
	check := func(name string, f baremetal.NodeFilter, keep func(n *baremetal.Node) bool) {
		t.Helper()
		var want []string
		for _, n := range all {
			if keep(n) {
				want = append(want, n.UUID)
			}
		}
		got, err := s.ListNodes(ctx(t), f, baremetal.Page{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var gotIDs []string
		for _, n := range got {
			gotIDs = append(gotIDs, n.UUID)
		}
		if strings.Join(gotIDs, ",") != strings.Join(want, ",") {
			t.Fatalf("%s: got %d nodes, want %d\n got %v\nwant %v", name, len(gotIDs), len(want), gotIDs, want)
		}
		c, err := s.CountNodes(ctx(t), f)
		if err != nil || c != len(want) {
			t.Fatalf("%s: CountNodes = %d, %v; want %d", name, c, err, len(want))
		}
		if len(want) == 0 {
			t.Fatalf("%s: the fixture selects nothing, so the filter is not tested", name)
		}
	}
	check("all", baremetal.NodeFilter{}, func(*baremetal.Node) bool { return true })
	check("states", baremetal.NodeFilter{ProvisionStates: []statemachine.State{"deploying", "wait call-back"}},
		func(n *baremetal.Node) bool {
			return n.ProvisionState == "deploying" || n.ProvisionState == "wait call-back"
		})
	check("maintenance", baremetal.NodeFilter{Maintenance: new(true)}, func(n *baremetal.Node) bool { return n.Maintenance })
	check("not maintenance", baremetal.NodeFilter{Maintenance: new(false)}, func(n *baremetal.Node) bool { return !n.Maintenance })
	check("reserved", baremetal.NodeFilter{Reserved: new(true)}, func(n *baremetal.Node) bool { return n.Reservation != "" })
	check("unreserved", baremetal.NodeFilter{Reserved: new(false)}, func(n *baremetal.Node) bool { return n.Reservation == "" })
	check("reserved by", baremetal.NodeFilter{ReservedBy: "host-1"}, func(n *baremetal.Node) bool { return n.Reservation == "host-1" })
	check("default group", baremetal.NodeFilter{ConductorGroup: new("")}, func(n *baremetal.Node) bool { return n.ConductorGroup == "" })
	check("group", baremetal.NodeFilter{ConductorGroup: new("rack-2")}, func(n *baremetal.Node) bool { return n.ConductorGroup == "rack-2" })
	check("driver", baremetal.NodeFilter{Drivers: []string{"redfish"}}, func(n *baremetal.Node) bool { return n.Driver == "redfish" })
	cut := Epoch().Add(10 * time.Second)
	check("older than", baremetal.NodeFilter{ProvisionUpdatedBefore: cut}, func(n *baremetal.Node) bool { return n.ProvisionUpdatedAt.Before(cut) })
	check("associated", baremetal.NodeFilter{Associated: new(true)}, func(n *baremetal.Node) bool { return n.InstanceUUID != "" })
	check("unassociated", baremetal.NodeFilter{Associated: new(false)}, func(n *baremetal.Node) bool { return n.InstanceUUID == "" })
	check("affinity not", baremetal.NodeFilter{ConductorAffinityNot: 2}, func(n *baremetal.Node) bool { return n.ConductorAffinity != 2 })
	check("console enabled", baremetal.NodeFilter{ConsoleEnabled: new(true)}, func(n *baremetal.Node) bool { return n.ConsoleEnabled })
	check("console disabled", baremetal.NodeFilter{ConsoleEnabled: new(false)}, func(n *baremetal.Node) bool { return !n.ConsoleEnabled })
	check("instance", baremetal.NodeFilter{InstanceUUID: "AAAAAAAA-0000-4000-8000-000000000008"}, func(n *baremetal.Node) bool { return n.InstanceUUID == "aaaaaaaa-0000-4000-8000-000000000008" })
	check("resource class", baremetal.NodeFilter{ResourceClass: "gold"}, func(n *baremetal.Node) bool { return n.ResourceClass == "gold" })
	check("fault", baremetal.NodeFilter{Fault: "power failure"}, func(n *baremetal.Node) bool { return n.Fault == "power failure" })
	check("owner", baremetal.NodeFilter{Owner: "proj-b"}, func(n *baremetal.Node) bool { return n.Owner == "proj-b" })
	check("lessee", baremetal.NodeFilter{Lessee: "proj-d"}, func(n *baremetal.Node) bool { return n.Lessee == "proj-d" })
	check("shards", baremetal.NodeFilter{Shards: []string{"s1", "s3"}}, func(n *baremetal.Node) bool { return n.Shard == "s1" || n.Shard == "s3" })
	check("retired", baremetal.NodeFilter{Retired: new(true)}, func(n *baremetal.Node) bool { return n.Retired })
	check("not retired", baremetal.NodeFilter{Retired: new(false)}, func(n *baremetal.Node) bool { return !n.Retired })
	check("description contains", baremetal.NodeFilter{DescriptionContains: "rack"}, func(n *baremetal.Node) bool { return strings.Contains(n.Description, "rack") })
	check("description wildcard is literal", baremetal.NodeFilter{DescriptionContains: "k 2"}, func(n *baremetal.Node) bool { return strings.Contains(n.Description, "k 2") })
	check("project", baremetal.NodeFilter{Project: "proj-c"}, func(n *baremetal.Node) bool { return n.Owner == "proj-c" || n.Lessee == "proj-c" })
	check("project as owner", baremetal.NodeFilter{Project: "proj-a"}, func(n *baremetal.Node) bool { return n.Owner == "proj-a" || n.Lessee == "proj-a" })
	check("sharded", baremetal.NodeFilter{Sharded: new(true)}, func(n *baremetal.Node) bool { return n.Shard != "" })
	check("not sharded", baremetal.NodeFilter{Sharded: new(false)}, func(n *baremetal.Node) bool { return n.Shard == "" })
	check("instance name", baremetal.NodeFilter{InstanceName: "vm-b"}, func(n *baremetal.Node) bool { return n.InstanceName == "vm-b" })
	check("no parent", baremetal.NodeFilter{ParentNode: new("")}, func(n *baremetal.Node) bool { return n.ParentNode == "" })
	check("children of", baremetal.NodeFilter{ParentNode: new(all[0].UUID)}, func(n *baremetal.Node) bool { return n.ParentNode == all[0].UUID })
	check("combined", baremetal.NodeFilter{ProvisionStates: []statemachine.State{"available"}, Reserved: new(false), Maintenance: new(false), ConductorGroup: new("rack-2")},
		func(n *baremetal.Node) bool {
			return n.ProvisionState == "available" && n.Reservation == "" && !n.Maintenance && n.ConductorGroup == "rack-2"
		})

	// Pages of 7 cover every node once, in ID order.
	var paged []string
	marker := ""
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatal("paging does not end")
		}
		page, err := s.ListNodes(ctx(t), baremetal.NodeFilter{}, baremetal.Page{Limit: 7, Marker: marker})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range page {
			paged = append(paged, n.UUID)
		}
		if len(page) < 7 {
			break
		}
		marker = page[len(page)-1].UUID
	}
	if len(paged) != len(all) {
		t.Fatalf("paging returned %d nodes, want %d", len(paged), len(all))
	}
	for i := range all {
		if paged[i] != all[i].UUID {
			t.Fatalf("page order differs at %d", i)
		}
	}
	// Sorted listings: by a text, a boolean and a time column, both
	// directions, paged by 5; ties and empty values ordered by ID.
	for _, sc := range []struct {
		key  string
		less func(a, b *baremetal.Node) int
	}{
		{"resource_class", func(a, b *baremetal.Node) int { return strings.Compare(a.ResourceClass, b.ResourceClass) }},
		{"name", func(a, b *baremetal.Node) int { return strings.Compare(a.Name, b.Name) }},
		{"maintenance", func(a, b *baremetal.Node) int { return cmpBool(a.Maintenance, b.Maintenance) }},
		{"provision_state", func(a, b *baremetal.Node) int {
			return strings.Compare(string(a.ProvisionState), string(b.ProvisionState))
		}},
		{"created_at", func(a, b *baremetal.Node) int { return a.CreatedAt.Compare(b.CreatedAt) }},
	} {
		for _, desc := range []bool{false, true} {
			want := slices.Clone(all)
			slices.SortStableFunc(want, func(a, b *baremetal.Node) int {
				c := sc.less(a, b)
				if c == 0 {
					c = cmpInt(a.ID, b.ID)
				}
				if desc {
					c = -c
				}
				return c
			})
			var got []*baremetal.Node
			marker := ""
			for pages := 0; pages < 20; pages++ {
				page, err := s.ListNodes(ctx(t), baremetal.NodeFilter{}, baremetal.Page{Limit: 5, Marker: marker, SortKey: sc.key, SortDesc: desc})
				if err != nil {
					t.Fatalf("sort %s desc=%v: %v", sc.key, desc, err)
				}
				got = append(got, page...)
				if len(page) < 5 {
					break
				}
				marker = page[len(page)-1].UUID
			}
			if len(got) != len(want) {
				t.Fatalf("sort %s desc=%v: %d nodes, want %d", sc.key, desc, len(got), len(want))
			}
			for i := range want {
				if got[i].UUID != want[i].UUID {
					t.Fatalf("sort %s desc=%v: order differs at %d: %s, want %s", sc.key, desc, i, got[i].Name, want[i].Name)
				}
			}
		}
	}
	_, err := s.ListNodes(ctx(t), baremetal.NodeFilter{}, baremetal.Page{SortKey: "driver_info"})
	wantField(t, err, "sort_key")
	_, err = s.ListNodes(ctx(t), baremetal.NodeFilter{}, baremetal.Page{Limit: 5, Marker: "99999999-0000-4000-8000-000000000000"})
	wantField(t, err, "marker")
	_, err = s.ListNodes(ctx(t), baremetal.NodeFilter{}, baremetal.Page{Limit: -1})
	wantField(t, err, "limit")
}

func testNodeDelete(t *testing.T, s baremetal.Store, _ *ManualClock) {
	n := mustNode(t, s, nil)
	p := &baremetal.Port{NodeUUID: n.UUID, Address: "52:54:00:00:00:01"}
	if err := s.CreatePort(ctx(t), p); err != nil {
		t.Fatal(err)
	}
	if err := s.AddHistory(ctx(t), &baremetal.HistoryEntry{NodeUUID: n.UUID, Event: "created"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReserveNode(ctx(t), n.UUID, "host-a"); err != nil {
		t.Fatal(err)
	}
	err := s.DeleteNode(ctx(t), n.UUID)
	var inUse *baremetal.NodeInUseError
	if !errors.As(err, &inUse) || inUse.Holder != "host-a" || !errors.Is(err, baremetal.ErrNodeLocked) {
		t.Fatalf("deleting a reserved node = %v, want NodeInUseError naming host-a", err)
	}
	if err := s.ReleaseNode(ctx(t), n.UUID, "host-a"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteNode(ctx(t), n.UUID); err != nil {
		t.Fatalf("DeleteNode: %v", err)
	}
	if _, err := s.GetNode(ctx(t), n.UUID); !errors.Is(err, baremetal.ErrNotFound) {
		t.Fatalf("deleted node still found: %v", err)
	}
	if _, err := s.GetPort(ctx(t), p.UUID); !errors.Is(err, baremetal.ErrNotFound) {
		t.Fatalf("port of deleted node still found: %v", err)
	}
	if _, err := s.ListHistory(ctx(t), n.UUID, 0); !errors.Is(err, baremetal.ErrNotFound) {
		t.Fatalf("history of deleted node: %v", err)
	}
	if err := s.DeleteNode(ctx(t), n.UUID); !errors.Is(err, baremetal.ErrNotFound) {
		t.Fatalf("second delete = %v, want ErrNotFound", err)
	}
}

func testPorts(t *testing.T, s baremetal.Store, _ *ManualClock) {
	a := mustNode(t, s, nil)
	b := mustNode(t, s, nil)
	p := &baremetal.Port{NodeUUID: a.UUID, Address: "52:54:00:AB:CD:EF", PXEEnabled: true,
		LocalLinkConnection: map[string]any{"switch_id": "aa:bb:cc:dd:ee:ff", "port_id": "Gi0/1"}, PhysicalNetwork: "physnet1"}
	if err := s.CreatePort(ctx(t), p); err != nil {
		t.Fatalf("CreatePort: %v", err)
	}
	if p.Address != "52:54:00:ab:cd:ef" || p.UUID == "" || p.Version != 1 {
		t.Fatalf("port not normalised/filled: %+v", p)
	}
	got, err := s.GetPort(ctx(t), "52-54-00-AB-CD-EF")
	if err != nil || got.UUID != p.UUID || got.NodeUUID != a.UUID || got.LocalLinkConnection["port_id"] != "Gi0/1" || !got.PXEEnabled {
		t.Fatalf("GetPort(mac) = %+v, %v", got, err)
	}
	if got.NotForDynamicPortgroup {
		t.Fatalf("GetPort = %+v; want it available for dynamic port groups, Ironic's default", got)
	}
	p2 := &baremetal.Port{NodeUUID: a.UUID, Address: "52:54:00:00:00:02", NotForDynamicPortgroup: true}
	if err := s.CreatePort(ctx(t), p2); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetPort(ctx(t), p2.UUID); err != nil || !got.NotForDynamicPortgroup {
		t.Fatalf("GetPort(not for dynamic port groups) = %+v, %v", got, err)
	}
	list, err := s.ListPorts(ctx(t), a.UUID)
	if err != nil || len(list) != 2 || list[0].UUID != p.UUID || list[1].UUID != p2.UUID {
		t.Fatalf("ListPorts = %v, %v", list, err)
	}
	// CAS update, moving the port to node b.
	stale := p.Clone()
	p.NodeUUID = b.UUID
	p.Extra = map[string]any{"moved": true}
	p.NotForDynamicPortgroup = true
	if err := s.UpdatePort(ctx(t), p); err != nil || p.Version != 2 {
		t.Fatalf("UpdatePort = %v (version %d)", err, p.Version)
	}
	if got, err := s.GetPort(ctx(t), p.UUID); err != nil || !got.NotForDynamicPortgroup {
		t.Fatalf("GetPort(updated) = %+v, %v; want not for dynamic port groups", got, err)
	}
	if err := s.UpdatePort(ctx(t), stale); !errors.Is(err, baremetal.ErrConflict) {
		t.Fatalf("stale port update = %v, want ErrConflict", err)
	}
	if l, _ := s.ListPorts(ctx(t), b.UUID); len(l) != 1 || l[0].Extra["moved"] != true {
		t.Fatalf("port did not move: %v", l)
	}
	if l, _ := s.ListPorts(ctx(t), ""); len(l) != 2 {
		t.Fatalf("ListPorts(all) = %d ports", len(l))
	}
	if err := s.DeletePort(ctx(t), p2.UUID); err != nil {
		t.Fatal(err)
	}
	if err := s.DeletePort(ctx(t), p2.UUID); !errors.Is(err, baremetal.ErrNotFound) {
		t.Fatalf("second DeletePort = %v", err)
	}
}

func testPortBadInput(t *testing.T, s baremetal.Store, _ *ManualClock) {
	n := mustNode(t, s, nil)
	if err := s.CreatePort(ctx(t), &baremetal.Port{NodeUUID: n.UUID, Address: "52:54:00:00:00:aa", Name: "eth0"}); err != nil {
		t.Fatal(err)
	}
	portCount := func() int {
		l, err := s.ListPorts(ctx(t), "")
		if err != nil {
			t.Fatal(err)
		}
		return len(l)
	}
	for _, tc := range []struct {
		field string
		port  baremetal.Port
	}{
		{"address", baremetal.Port{NodeUUID: n.UUID, Address: "52:54:00:00:00"}},
		{"address", baremetal.Port{NodeUUID: n.UUID, Address: "zz:54:00:00:00:01"}},
		{"address", baremetal.Port{NodeUUID: n.UUID, Address: "00:00:00:00:fe:80:00:00:00:00:00:00:02:00:5e:10"}},
		{"address", baremetal.Port{NodeUUID: n.UUID, Address: "52:54:00:00:00:AA"}},
		{"name", baremetal.Port{NodeUUID: n.UUID, Address: "52:54:00:00:00:ab", Name: "eth0"}},
		{"node_uuid", baremetal.Port{NodeUUID: "nope", Address: "52:54:00:00:00:ac"}},
		{"extra", baremetal.Port{NodeUUID: n.UUID, Address: "52:54:00:00:00:ad", Extra: map[string]any{"x": math.Inf(-1)}}},
		{"physical_network", baremetal.Port{NodeUUID: n.UUID, Address: "52:54:00:00:00:ae", PhysicalNetwork: strings.Repeat("p", 65)}},
	} {
		before := portCount()
		p := tc.port
		wantField(t, s.CreatePort(ctx(t), &p), tc.field)
		if after := portCount(); after != before {
			t.Fatalf("bad %s changed the store", tc.field)
		}
	}
	err := s.CreatePort(ctx(t), &baremetal.Port{NodeUUID: "99999999-0000-4000-8000-000000000000", Address: "52:54:00:00:00:af"})
	if !errors.Is(err, baremetal.ErrNotFound) {
		t.Fatalf("port of unknown node = %v, want ErrNotFound", err)
	}
}

func testLookup(t *testing.T, s baremetal.Store, _ *ManualClock) {
	a := mustNode(t, s, nil)
	b := mustNode(t, s, nil)
	for i, owner := range []*baremetal.Node{a, a, b} {
		if err := s.CreatePort(ctx(t), &baremetal.Port{NodeUUID: owner.UUID, Address: fmt.Sprintf("52:54:00:00:01:%02x", i)}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.LookupNode(ctx(t), "", []string{"not-a-mac", "52:54:00:00:01:01", "52:54:00:00:01:00"})
	if err != nil || got.UUID != a.UUID {
		t.Fatalf("lookup by MACs = %v, %v; want %s", got, err, a.UUID)
	}
	got, err = s.LookupNode(ctx(t), b.UUID, []string{"52:54:00:00:01:00"})
	if err != nil || got.UUID != b.UUID {
		t.Fatalf("lookup by UUID = %v, %v; the UUID wins", got, err)
	}
	if _, err := s.LookupNode(ctx(t), "", []string{"52:54:00:00:01:00", "52:54:00:00:01:02"}); !errors.Is(err, baremetal.ErrNotFound) {
		t.Fatalf("MACs of two nodes = %v, want ErrNotFound", err)
	}
	if _, err := s.LookupNode(ctx(t), "", []string{"52:54:00:99:99:99"}); !errors.Is(err, baremetal.ErrNotFound) {
		t.Fatalf("unknown MAC = %v, want ErrNotFound", err)
	}
	_, err = s.LookupNode(ctx(t), "", []string{"garbage"})
	wantField(t, err, "addresses")
	_, err = s.LookupNode(ctx(t), "node-name", nil)
	wantField(t, err, "node_uuid")
}

// testLookupManyAddresses looks up with 70,000 MAC addresses, more than
// SQLite (32766) or PostgreSQL (65535) binds in one statement, as a
// hostile client may send (about 40,000 answered 500 "too many SQL
// variables"): the store must look them up, not fail, and name them in a
// not-found error of readable length.
func testLookupManyAddresses(t *testing.T, s baremetal.Store, _ *ManualClock) {
	a := mustNode(t, s, nil)
	b := mustNode(t, s, nil)
	const aMAC, bMAC = "52:54:00:00:02:00", "52:54:00:00:02:01"
	for mac, owner := range map[string]*baremetal.Node{aMAC: a, bMAC: b} {
		if err := s.CreatePort(ctx(t), &baremetal.Port{NodeUUID: owner.UUID, Address: mac}); err != nil {
			t.Fatal(err)
		}
	}
	const n = 70000
	// many returns n addresses matching no port, with extra put at the
	// given positions.
	many := func(extra map[int]string) []string {
		macs := make([]string, n)
		for i := range macs {
			macs[i] = fmt.Sprintf("02:00:00:%02x:%02x:%02x", i>>16, i>>8&0xff, i&0xff)
			if e, ok := extra[i]; ok {
				macs[i] = e
			}
		}
		return macs
	}
	got, err := s.LookupNode(ctx(t), "", many(map[int]string{66666: aMAC}))
	if err != nil || got.UUID != a.UUID {
		t.Fatalf("lookup by %d MACs, one of them node a's = %v, %v; want %s", n, got, err, a.UUID)
	}
	got, err = s.LookupNode(ctx(t), "", many(map[int]string{7: strings.ToUpper(aMAC), 66000: aMAC, n - 1: "not-a-mac"}))
	if err != nil || got.UUID != a.UUID {
		t.Fatalf("lookup by %d MACs naming node a's twice = %v, %v; want %s", n, got, err, a.UUID)
	}
	for name, macs := range map[string][]string{
		"two nodes' MACs far apart": many(map[int]string{1: aMAC, n - 2: bMAC}),
		"no matching MAC":           many(nil),
	} {
		_, err := s.LookupNode(ctx(t), "", macs)
		if !errors.Is(err, baremetal.ErrNotFound) {
			t.Fatalf("%s: lookup by %d MACs = %v, want ErrNotFound", name, n, err)
		}
		if len(err.Error()) > 1024 {
			t.Fatalf("%s: the not-found error is %d bytes long; it must stay readable", name, len(err.Error()))
		}
	}
}

func testReservation(t *testing.T, s baremetal.Store, _ *ManualClock) {
	n := mustNode(t, s, nil)
	locked, err := s.ReserveNode(ctx(t), n.UUID, "host-a")
	if err != nil {
		t.Fatalf("ReserveNode: %v", err)
	}
	if locked.Reservation != "host-a" || locked.UUID != n.UUID {
		t.Fatalf("reserved node = %v", locked)
	}
	for _, who := range []string{"host-b", "host-a"} {
		_, err = s.ReserveNode(ctx(t), n.UUID, who)
		var nl *baremetal.NodeLockedError
		if !errors.As(err, &nl) || nl.Holder != "host-a" || nl.Node != n.UUID || !errors.Is(err, baremetal.ErrNodeLocked) {
			t.Fatalf("second reserve by %s = %v, want NodeLocked by host-a", who, err)
		}
		if !strings.Contains(err.Error(), "host-a") || !strings.Contains(err.Error(), n.UUID) {
			t.Fatalf("NodeLocked text %q must name node and holder", err)
		}
	}
	err = s.ReleaseNode(ctx(t), n.UUID, "host-b")
	if !errors.Is(err, baremetal.ErrNodeLocked) {
		t.Fatalf("release by non-holder = %v, want ErrNodeLocked", err)
	}
	if err := s.ReleaseNode(ctx(t), n.UUID, "host-a"); err != nil {
		t.Fatalf("release by holder: %v", err)
	}
	if err := s.ReleaseNode(ctx(t), n.UUID, "host-a"); !errors.Is(err, baremetal.ErrNodeNotLocked) {
		t.Fatalf("release of unlocked = %v, want ErrNodeNotLocked", err)
	}
	got, _ := s.GetNode(ctx(t), n.UUID)
	if got.Reservation != "" || got.Version != n.Version {
		t.Fatalf("after release: reservation %q version %d (locks must not bump the version)", got.Reservation, got.Version)
	}
	if _, err := s.ReserveNode(ctx(t), "99999999-0000-4000-8000-000000000000", "host-a"); !errors.Is(err, baremetal.ErrNotFound) {
		t.Fatalf("reserve unknown = %v", err)
	}
	if err := s.ReleaseNode(ctx(t), "99999999-0000-4000-8000-000000000000", "host-a"); !errors.Is(err, baremetal.ErrNotFound) {
		t.Fatalf("release unknown = %v", err)
	}
	_, err = s.ReserveNode(ctx(t), n.UUID, "")
	wantField(t, err, "holder")
}

func testAcquireNode(t *testing.T, s baremetal.Store, clock *ManualClock) {
	n := mustNode(t, s, nil)
	if _, err := s.ReserveNode(ctx(t), n.UUID, "host-a"); err != nil {
		t.Fatal(err)
	}
	// Bounded retries: 3 attempts 1 s apart on the manual clock.
	done := make(chan error, 1)
	go func() {
		_, err := baremetal.AcquireNode(ctx(t), s, n.UUID, "host-b", baremetal.LockPolicy{Attempts: 3, Interval: time.Second, Clock: clock})
		done <- err
	}()
	for i := 0; i < 2; i++ {
		waitForWaiter(t, clock)
		clock.Advance(time.Second)
	}
	err := <-done
	var nl *baremetal.NodeLockedError
	if !errors.As(err, &nl) || nl.Holder != "host-a" {
		t.Fatalf("AcquireNode after 3 attempts = %v, want NodeLocked by host-a", err)
	}
	// Patient: waits for the release.
	got := make(chan *baremetal.Node, 1)
	go func() {
		n2, err := baremetal.AcquireNode(ctx(t), s, n.UUID, "host-b", baremetal.LockPolicy{Patient: true, Interval: time.Second, Clock: clock})
		if err != nil {
			t.Errorf("patient AcquireNode: %v", err)
		}
		got <- n2
	}()
	for i := 0; i < 5; i++ {
		waitForWaiter(t, clock)
		clock.Advance(time.Second)
	}
	waitForWaiter(t, clock)
	if err := s.ReleaseNode(ctx(t), n.UUID, "host-a"); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	if n2 := <-got; n2 == nil || n2.Reservation != "host-b" {
		t.Fatalf("patient acquire returned %v", n2)
	}
	// Context end stops a patient wait and says why.
	c, cancel := context.WithCancel(ctx(t))
	go func() {
		_, err := baremetal.AcquireNode(c, s, n.UUID, "host-c", baremetal.LockPolicy{Patient: true, Clock: clock})
		done <- err
	}()
	waitForWaiter(t, clock)
	cancel()
	err = <-done
	if !errors.Is(err, context.Canceled) || !errors.Is(err, baremetal.ErrNodeLocked) {
		t.Fatalf("cancelled acquire = %v, want both context.Canceled and ErrNodeLocked", err)
	}
	// Unknown nodes fail at once, without waiting.
	_, err = baremetal.AcquireNode(ctx(t), s, "99999999-0000-4000-8000-000000000000", "host-b", baremetal.LockPolicy{Clock: clock})
	if !errors.Is(err, baremetal.ErrNotFound) {
		t.Fatalf("acquire unknown = %v", err)
	}
}

// waitForWaiter blocks until code under test waits on the clock.
func waitForWaiter(t *testing.T, clock *ManualClock) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for clock.Waiters() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("nothing waits on the clock")
		}
		time.Sleep(time.Millisecond)
	}
}

func testReservationsOf(t *testing.T, s baremetal.Store, _ *ManualClock) {
	var nodes []*baremetal.Node
	for i := 0; i < 4; i++ {
		nodes = append(nodes, mustNode(t, s, func(n *baremetal.Node) { n.TargetPowerState = "power on" }))
	}
	holders := []string{"Host-A", "host-a", "host-b", ""}
	for i, h := range holders {
		if h != "" {
			if _, err := s.ReserveNode(ctx(t), nodes[i].UUID, h); err != nil {
				t.Fatal(err)
			}
		}
	}
	cleared, err := s.ClearTargetPowerStateOf(ctx(t), "host-a", "pending power operation aborted by a conductor restart")
	if err != nil || cleared != 2 {
		t.Fatalf("ClearTargetPowerStateOf = %d, %v; want 2", cleared, err)
	}
	got, _ := s.GetNode(ctx(t), nodes[0].UUID)
	if got.TargetPowerState != "" || !strings.Contains(got.LastError, "aborted") || got.Version != 2 {
		t.Fatalf("target power state not cleared: %+v", got)
	}
	if other, _ := s.GetNode(ctx(t), nodes[2].UUID); other.TargetPowerState != "power on" {
		t.Fatal("another conductor's node was cleared")
	}
	released, err := s.ReleaseReservationsOf(ctx(t), "HOST-A")
	if err != nil || released != 2 {
		t.Fatalf("ReleaseReservationsOf = %d, %v; want 2 (case-insensitive)", released, err)
	}
	for i, want := range []string{"", "", "host-b", ""} {
		got, _ := s.GetNode(ctx(t), nodes[i].UUID)
		if got.Reservation != want {
			t.Fatalf("node %d reservation %q, want %q", i, got.Reservation, want)
		}
	}
}

func testConductorRegistration(t *testing.T, s baremetal.Store, clock *ManualClock) {
	reg := baremetal.ConductorRegistration{
		Hostname: "cond-1", ConductorGroup: "rack-1", Drivers: []string{"ipmi", "redfish"},
		Interfaces: []baremetal.HardwareInterface{
			{HardwareType: "ipmi", InterfaceType: "power", InterfaceName: "ipmitool", Default: true},
			{HardwareType: "redfish", InterfaceType: "power", InterfaceName: "redfish", Default: true},
		},
	}
	c, err := s.RegisterConductor(ctx(t), reg)
	if err != nil {
		t.Fatalf("RegisterConductor: %v", err)
	}
	if c.ID == 0 || !c.Online || c.ConductorGroup != "rack-1" || len(c.Drivers) != 2 || !c.UpdatedAt.Equal(clock.Now()) {
		t.Fatalf("registered row = %+v", c)
	}
	_, err = s.RegisterConductor(ctx(t), reg)
	var already *baremetal.ConductorAlreadyRegisteredError
	if !errors.As(err, &already) || already.Hostname != "cond-1" || !errors.Is(err, baremetal.ErrConductorAlreadyRegistered) {
		t.Fatalf("second registration = %v, want ConductorAlreadyRegistered", err)
	}
	reg.UpdateExisting = true
	reg.Interfaces = reg.Interfaces[:1]
	c2, err := s.RegisterConductor(ctx(t), reg)
	if err != nil || c2.ID != c.ID {
		t.Fatalf("forced re-registration = %+v, %v", c2, err)
	}
	hi, err := s.ListHardwareInterfaces(ctx(t), "cond-1")
	if err != nil || len(hi) != 1 || hi[0].InterfaceName != "ipmitool" || !hi[0].Default {
		t.Fatalf("interfaces not replaced: %+v, %v", hi, err)
	}
	// Unregister, then a restart registers over the offline row.
	if err := s.UnregisterConductor(ctx(t), "cond-1"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetConductor(ctx(t), "cond-1"); got.Online {
		t.Fatal("unregistered conductor still online")
	}
	reg.UpdateExisting = false
	clock.Advance(time.Minute)
	c3, err := s.RegisterConductor(ctx(t), reg)
	if err != nil || c3.ID != c.ID || !c3.Online || !c3.UpdatedAt.Equal(clock.Now()) {
		t.Fatalf("re-registration of an offline row = %+v, %v", c3, err)
	}
	_, err = s.RegisterConductor(ctx(t), baremetal.ConductorRegistration{})
	wantField(t, err, "hostname")
	_, err = s.RegisterConductor(ctx(t), baremetal.ConductorRegistration{Hostname: "x", Interfaces: []baremetal.HardwareInterface{{HardwareType: "ipmi"}}})
	wantField(t, err, "interfaces")
	if err := s.KeepaliveConductor(ctx(t), "ghost", true); !errors.Is(err, baremetal.ErrNotFound) {
		t.Fatalf("keepalive of unknown conductor = %v", err)
	}
	if _, err := s.GetConductor(ctx(t), "ghost"); !errors.Is(err, baremetal.ErrNotFound) {
		t.Fatalf("GetConductor(unknown) = %v", err)
	}
}

func testConductorLiveness(t *testing.T, s baremetal.Store, clock *ManualClock) {
	const timeout = 60 * time.Second
	for _, h := range []string{"c-a", "c-b", "c-c"} {
		if _, err := s.RegisterConductor(ctx(t), baremetal.ConductorRegistration{Hostname: h}); err != nil {
			t.Fatal(err)
		}
	}
	names := func(cs []*baremetal.ConductorRecord) string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Hostname)
		}
		return strings.Join(out, ",")
	}
	alive, err := s.ListAliveConductors(ctx(t), timeout)
	if err != nil || names(alive) != "c-a,c-b,c-c" {
		t.Fatalf("alive = %s, %v", names(alive), err)
	}
	// c-a keeps alive every 10 s, c-b drains (heart-beating, offline), c-c stops.
	for i := 0; i < 7; i++ {
		clock.Advance(10 * time.Second)
		if err := s.KeepaliveConductor(ctx(t), "c-a", true); err != nil {
			t.Fatal(err)
		}
		if err := s.DrainConductor(ctx(t), "c-b"); err != nil {
			t.Fatal(err)
		}
	}
	alive, _ = s.ListAliveConductors(ctx(t), timeout)
	if names(alive) != "c-a" {
		t.Fatalf("alive after 70 s = %s, want c-a only", names(alive))
	}
	offline, err := s.ListOfflineConductors(ctx(t), timeout, "c-a")
	if err != nil || strings.Join(offline, ",") != "c-c" {
		t.Fatalf("offline = %v, %v; want c-c (a draining conductor is not dead)", offline, err)
	}
	// The current conductor never counts itself dead.
	clock.Advance(2 * time.Minute)
	offline, _ = s.ListOfflineConductors(ctx(t), timeout, "C-A")
	if strings.Join(offline, ",") != "c-b,c-c" {
		t.Fatalf("offline seen by c-a = %v, want c-b,c-c", offline)
	}
	// Stale-row cleanup deletes only offline rows older than the limit,
	// the longest silent first.
	if err := s.UnregisterConductor(ctx(t), "c-c"); err != nil {
		t.Fatal(err)
	}
	deleted, err := s.DeleteStaleConductors(ctx(t), time.Minute, 50)
	if err != nil || strings.Join(deleted, ",") != "c-c,c-b" {
		t.Fatalf("DeleteStaleConductors = %v, %v", deleted, err)
	}
	if _, err := s.GetConductor(ctx(t), "c-a"); err != nil {
		t.Fatalf("online conductor deleted: %v", err)
	}
}

func testBreakDead(t *testing.T, s baremetal.Store, clock *ManualClock) {
	for _, h := range []string{"c-live", "c-dead", "c-self"} {
		if _, err := s.RegisterConductor(ctx(t), baremetal.ConductorRegistration{Hostname: h}); err != nil {
			t.Fatal(err)
		}
	}
	var nodes []*baremetal.Node
	for i, h := range []string{"c-live", "c-dead", "c-dead", "c-self", "c-unknown"} {
		n := mustNode(t, s, nil)
		if _, err := s.ReserveNode(ctx(t), n.UUID, h); err != nil {
			t.Fatalf("reserve %d: %v", i, err)
		}
		nodes = append(nodes, n)
	}
	clock.Advance(61 * time.Second)
	if err := s.KeepaliveConductor(ctx(t), "c-live", true); err != nil {
		t.Fatal(err)
	}
	broken, err := s.BreakDeadReservations(ctx(t), time.Minute, "c-self")
	if err != nil {
		t.Fatal(err)
	}
	if len(broken) != 2 || broken[0].Holder != "c-dead" || broken[1].Holder != "c-dead" {
		t.Fatalf("broken = %+v, want the two nodes of c-dead", broken)
	}
	want := map[string]bool{nodes[1].UUID: true, nodes[2].UUID: true}
	for _, b := range broken {
		if !want[b.NodeUUID] {
			t.Fatalf("broke the wrong node %s", b.NodeUUID)
		}
	}
	for i, h := range []string{"c-live", "", "", "c-self", "c-unknown"} {
		got, _ := s.GetNode(ctx(t), nodes[i].UUID)
		if got.Reservation != h {
			t.Fatalf("node %d reservation %q, want %q", i, got.Reservation, h)
		}
	}
	// A dead holder that wakes up cannot write.
	n := nodes[1]
	n.Extra = map[string]any{"late": true}
	if err := s.UpdateNode(ctx(t), n, "c-dead"); !errors.Is(err, baremetal.ErrConflict) {
		t.Fatalf("write by the dead holder = %v, want ErrConflict", err)
	}
}

func testHistory(t *testing.T, s baremetal.Store, clock *ManualClock) {
	n := mustNode(t, s, nil)
	for i := 0; i < 5; i++ {
		clock.Advance(time.Second)
		e := &baremetal.HistoryEntry{NodeUUID: n.UUID, Event: fmt.Sprintf("event %d", i), EventType: "provisioning",
			Severity: baremetal.HistoryError, Message: fmt.Sprintf("step %d failed: ipmi_password=hunter2 rejected", i), Conductor: "c-1", User: "admin"}
		if err := s.AddHistory(ctx(t), e); err != nil {
			t.Fatal(err)
		}
		if e.ID == 0 || !e.CreatedAt.Equal(clock.Now()) {
			t.Fatalf("entry not filled: %+v", e)
		}
	}
	all, err := s.ListHistory(ctx(t), n.UUID, 0)
	if err != nil || len(all) != 5 {
		t.Fatalf("ListHistory = %d, %v", len(all), err)
	}
	for i, e := range all {
		if e.Event != fmt.Sprintf("event %d", i) || e.Severity != "ERROR" || e.Conductor != "c-1" || e.User != "admin" || e.EventType != "provisioning" {
			t.Fatalf("entry %d = %+v", i, e)
		}
		if strings.Contains(e.Message, "hunter2") || !strings.Contains(e.Message, baremetal.Mask) {
			t.Fatalf("history message not masked: %q", e.Message)
		}
	}
	last, _ := s.ListHistory(ctx(t), n.UUID, 2)
	if len(last) != 2 || last[0].Event != "event 3" || last[1].Event != "event 4" {
		t.Fatalf("ListHistory(limit 2) = %+v", last)
	}
	err = s.AddHistory(ctx(t), &baremetal.HistoryEntry{NodeUUID: n.UUID, Event: "x", Severity: "LOUD"})
	wantField(t, err, "severity")
	err = s.AddHistory(ctx(t), &baremetal.HistoryEntry{NodeUUID: "99999999-0000-4000-8000-000000000000", Event: "x"})
	if !errors.Is(err, baremetal.ErrNotFound) {
		t.Fatalf("history of unknown node = %v", err)
	}
}

func testNotifier(t *testing.T, s baremetal.Store, _ *ManualClock) {
	nn, ok := s.(baremetal.NodeChangeNotifier)
	if !ok {
		t.Skip("store does not implement baremetal.NodeChangeNotifier")
	}
	var mu sync.Mutex
	var seen []string
	cancel := nn.SubscribeNodeChanges(func(c baremetal.NodeChange) {
		mu.Lock()
		seen = append(seen, c.Op+":"+string(c.ProvisionState))
		mu.Unlock()
	})
	n := mustNode(t, s, nil)
	if _, err := s.ReserveNode(ctx(t), n.UUID, "h"); err != nil {
		t.Fatal(err)
	}
	n.ProvisionState, n.TargetProvisionState = "verifying", "manageable"
	if err := s.UpdateNode(ctx(t), n, "h"); err != nil {
		t.Fatal(err)
	}
	if err := s.ReleaseNode(ctx(t), n.UUID, "h"); err != nil {
		t.Fatal(err)
	}
	cancel()
	cancel() // idempotent
	if err := s.TouchProvisioning(ctx(t), n.UUID); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(seen, ",") != "create:enroll,reserve:enroll,update:verifying,release:" {
		t.Fatalf("changes seen = %v", seen)
	}
}

func testSecretsInErrors(t *testing.T, s baremetal.Store, _ *ManualClock) {
	n := mustNode(t, s, func(n *baremetal.Node) {
		n.DriverInfo = map[string]any{"ipmi_password": "Pw-ipmi-1", "redfish_password": "Pw-redfish-2"}
		n.DriverInternalInfo = map[string]any{driver.InternalAgentToken: "Tok-agent-3"}
	})
	secrets := []string{"Pw-ipmi-1", "Pw-redfish-2", "Tok-agent-3"}
	var errs []error
	stale := n.Clone()
	stale.Version = 0
	errs = append(errs, s.UpdateNode(ctx(t), stale, ""))
	bad := n.Clone()
	bad.DriverInfo["x"] = math.NaN()
	errs = append(errs, s.UpdateNode(ctx(t), bad, ""))
	_, err := s.ReserveNode(ctx(t), n.UUID, "h1")
	errs = append(errs, err)
	_, err = s.ReserveNode(ctx(t), n.UUID, "h2")
	errs = append(errs, err)
	errs = append(errs, s.UpdateNode(ctx(t), n.Clone(), "h2"))
	errs = append(errs, s.DeleteNode(ctx(t), n.UUID))
	dup := n.Clone()
	dup.ID = 0
	errs = append(errs, s.CreateNode(ctx(t), dup))
	nonNil := 0
	for _, e := range errs {
		if e == nil {
			continue
		}
		nonNil++
		for _, sec := range secrets {
			if strings.Contains(e.Error(), sec) || strings.Contains(fmt.Sprintf("%+v", e), sec) {
				t.Fatalf("error leaks a secret: %v", e)
			}
		}
	}
	if nonNil < 5 {
		t.Fatalf("only %d of the provoked errors happened", nonNil)
	}
}

func testConcurrentReserve(t *testing.T, s baremetal.Store, _ *ManualClock) {
	n := mustNode(t, s, nil)
	const contenders = 8
	var wg sync.WaitGroup
	wins := make(chan string, contenders)
	for i := 0; i < contenders; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			host := fmt.Sprintf("host-%d", i)
			_, err := s.ReserveNode(ctx(t), n.UUID, host)
			switch {
			case err == nil:
				wins <- host
			case !errors.Is(err, baremetal.ErrNodeLocked):
				t.Errorf("reserve by %s: %v", host, err)
			}
		}(i)
	}
	wg.Wait()
	close(wins)
	var winners []string
	for w := range wins {
		winners = append(winners, w)
	}
	if len(winners) != 1 {
		t.Fatalf("winners = %v, want exactly one", winners)
	}
	got, _ := s.GetNode(ctx(t), n.UUID)
	if got.Reservation != winners[0] {
		t.Fatalf("stored holder %q, winner %q", got.Reservation, winners[0])
	}
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
