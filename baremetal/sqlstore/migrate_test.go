package sqlstore_test

import (
	"context"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/baremetal/sqlstore/sqlstoretest"
	"github.com/pressly/goose/v3"
)

// checkMigrations runs the embedded migrations on a fresh database (done
// by opening), then all the way down and up again, and checks the schema
// works after each step.
func checkMigrations(t *testing.T, s *sqlstore.Store) {
	ctx := context.Background()
	p, err := sqlstore.MigrationsForTest(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	// Every embedded migration applies, in order (their numbers may be
	// renumbered when branches merge).
	latest := len(p.ListSources())
	v, err := s.SchemaVersion(ctx)
	if err != nil || v != int64(latest) {
		t.Fatalf("fresh database at schema version %d, %v; want %d", v, err, latest)
	}
	if err := s.CreateNode(ctx, &baremetal.Node{Name: "before"}); err != nil {
		t.Fatalf("schema unusable after up: %v", err)
	}
	checkChassisVolumeMigration(t, s, p)
	checkResourcesMigration(t, s, p)
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("migrating up to the latest: %v", err)
	}
	checkInventoryMigration(t, s, p)
	checkHistoryFieldsMigration(t, s, p)
	checkAPI1115Migration(t, s, p)
	if _, err := p.DownTo(ctx, 0); err != nil {
		t.Fatalf("migrating down: %v", err)
	}
	if v, _ := p.GetDBVersion(ctx); v != 0 {
		t.Fatalf("version after down = %d", v)
	}
	if _, err := s.CountNodes(ctx, baremetal.NodeFilter{}); err == nil {
		t.Fatal("nodes table still there after migrating down")
	}
	results, err := p.Up(ctx)
	if err != nil || len(results) != latest {
		t.Fatalf("migrating up again: %d applied, %v", len(results), err)
	}
	if c, err := s.CountNodes(ctx, baremetal.NodeFilter{}); err != nil || c != 0 {
		t.Fatalf("after down and up: %d nodes, %v; want an empty, working schema", c, err)
	}
	if pending, err := p.HasPending(ctx); err != nil || pending {
		t.Fatalf("pending migrations after up: %v, %v", pending, err)
	}
}

// checkResourcesMigration steps migration 5 (portgroups, allocations,
// deploy templates, runbooks) down and up on a database holding a port
// in a portgroup: down drops the new tables and columns and keeps the
// node and its port (SQLite rebuilds the ports table for it), up brings
// back empty tables and the port without a portgroup.
func checkResourcesMigration(t *testing.T, s *sqlstore.Store, p *goose.Provider) {
	t.Helper()
	ctx := context.Background()
	n, err := s.GetNode(ctx, "before")
	if err != nil {
		t.Fatal(err)
	}
	// The port is written and read by today's code: at the latest schema.
	if _, err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	g := &baremetal.Portgroup{NodeUUID: n.UUID, Name: "bond0"}
	if err := s.Portgroups().Create(ctx, g); err != nil {
		t.Fatalf("schema 5 cannot store a portgroup: %v", err)
	}
	port := &baremetal.Port{NodeUUID: n.UUID, Address: "52:54:00:00:00:05", PortgroupUUID: g.UUID}
	if err := s.CreatePort(ctx, port); err != nil {
		t.Fatal(err)
	}
	if err := s.Allocations().Create(ctx, &baremetal.Allocation{ResourceClass: "baremetal"}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, 4); err != nil {
		t.Fatalf("migrating down to 4: %v", err)
	}
	if _, err := s.Allocations().List(ctx, baremetal.AllocationFilter{}, baremetal.Page{}); err == nil {
		t.Fatal("allocations table still there after migrating down to 4")
	}
	if _, err := p.UpTo(ctx, 5); err != nil {
		t.Fatalf("migrating up to 5: %v", err)
	}
	if _, err := s.Portgroups().List(ctx, baremetal.PortgroupFilter{}, baremetal.Page{}); err != nil {
		t.Fatalf("portgroups table missing after migrating up to 5: %v", err)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetPort(ctx, port.UUID)
	if err != nil || got.PortgroupUUID != "" || got.NodeUUID != n.UUID {
		t.Fatalf("port after down and up = %+v, %v; want it kept, on its node, without portgroup", got, err)
	}
	if l, err := s.Portgroups().List(ctx, baremetal.PortgroupFilter{}, baremetal.Page{}); err != nil || len(l) != 0 {
		t.Fatalf("portgroups after down and up = %d, %v; want an empty table", len(l), err)
	}
	if err := s.DeletePort(ctx, port.UUID); err != nil {
		t.Fatal(err)
	}
}

// checkChassisVolumeMigration steps the chassis and volume migration
// down and up on a database holding a node in a chassis with a volume
// connector and target: down drops the tables and the node's chassis and
// keeps the node, up brings back empty tables and the node without a
// chassis.
func checkChassisVolumeMigration(t *testing.T, s *sqlstore.Store, p *goose.Provider) {
	t.Helper()
	ctx := context.Background()
	var version int64
	for _, src := range p.ListSources() {
		if strings.HasSuffix(src.Path, "_chassis_volume.sql") {
			version = src.Version
		}
	}
	if version == 0 {
		t.Fatal("no chassis and volume migration embedded")
	}
	ch := &baremetal.Chassis{Description: "rack 1"}
	if err := s.Chassis().Create(ctx, ch); err != nil {
		t.Fatalf("schema %d cannot store a chassis: %v", version, err)
	}
	n := &baremetal.Node{Name: "in-chassis", ChassisUUID: ch.UUID}
	if err := s.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	if err := s.VolumeConnectors().Create(ctx, &baremetal.VolumeConnector{NodeUUID: n.UUID, Type: "iqn", ConnectorID: "iqn.2026-01.org.example:n1"}); err != nil {
		t.Fatal(err)
	}
	if err := s.VolumeTargets().Create(ctx, &baremetal.VolumeTarget{NodeUUID: n.UUID, VolumeType: "iscsi", VolumeID: "v1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, version-1); err != nil {
		t.Fatalf("migrating down to %d: %v", version-1, err)
	}
	if _, err := s.Chassis().List(ctx, baremetal.ChassisFilter{}, baremetal.Page{}); err == nil {
		t.Fatalf("chassis table still there after migrating down to %d", version-1)
	}
	if _, err := p.UpTo(ctx, version); err != nil {
		t.Fatalf("migrating up to %d: %v", version, err)
	}
	got, err := s.GetNode(ctx, n.UUID)
	if err != nil || got.ChassisUUID != "" {
		t.Fatalf("node after down and up = %+v, %v; want it kept without a chassis", got, err)
	}
	if l, err := s.VolumeConnectors().List(ctx, baremetal.VolumeFilter{}, baremetal.Page{}); err != nil || len(l) != 0 {
		t.Fatalf("volume connectors after down and up = %d, %v; want an empty table", len(l), err)
	}
	if err := s.DeleteNode(ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
}

// checkHistoryFieldsMigration steps the history fields migration (state, target
// and duration) down and up on a database holding a history entry: the
// entry survives both ways and comes back without the new fields.
func checkHistoryFieldsMigration(t *testing.T, s *sqlstore.Store, p *goose.Provider) {
	t.Helper()
	ctx := context.Background()
	var version int64
	for _, src := range p.ListSources() {
		if strings.HasSuffix(src.Path, "_history_fields.sql") {
			version = src.Version
		}
	}
	if version == 0 {
		t.Fatal("no history fields migration embedded")
	}
	if _, err := p.UpTo(ctx, version); err != nil {
		t.Fatalf("migrating up to %d: %v", version, err)
	}
	n := &baremetal.Node{Name: "historied", ProvisionState: "enroll"}
	if err := s.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	e := &baremetal.HistoryEntry{NodeUUID: n.UUID, Event: "node enrolled"}
	if err := s.AddHistory(ctx, e); err != nil || e.State != "enroll" || e.Duration == nil {
		t.Fatalf("schema %d entry %+v, %v; want its state and duration", version, e, err)
	}
	if _, err := p.DownTo(ctx, version-1); err != nil {
		t.Fatalf("migrating down to %d: %v", version-1, err)
	}
	if _, err := p.UpTo(ctx, version); err != nil {
		t.Fatalf("migrating up to %d: %v", version, err)
	}
	got, err := s.GetHistory(ctx, n.UUID, e.ID)
	if err != nil || got.Event != "node enrolled" || got.State != "" || got.Duration != nil {
		t.Fatalf("entry after down and up = %+v, %v; want it kept, without state and duration", got, err)
	}
}

// checkAPI1115Migration steps the migration of Ironic 1.111 and 1.112
// (a port's available_for_dynamic_portgroup, a runbook's description and
// traits) down and up on a database holding a runbook with traits and a
// port out of dynamic port groups: both survive, the port comes back
// available (the column's default, Ironic's) and the runbook with its
// name as its one trait, as Ironic's data migration gives it.
func checkAPI1115Migration(t *testing.T, s *sqlstore.Store, p *goose.Provider) {
	t.Helper()
	ctx := context.Background()
	var version int64
	for _, src := range p.ListSources() {
		if strings.HasSuffix(src.Path, "_api_1115.sql") {
			version = src.Version
		}
	}
	if version == 0 {
		t.Fatal("no 1.111/1.112 migration embedded")
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatal(err)
	}
	n := &baremetal.Node{Name: "ported"}
	if err := s.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	port := &baremetal.Port{NodeUUID: n.UUID, Address: "52:54:00:00:11:15", NotForDynamicPortgroup: true}
	if err := s.CreatePort(ctx, port); err != nil {
		t.Fatal(err)
	}
	rb := &baremetal.Runbook{Name: "CUSTOM_LEGACY", Description: "old", Traits: []string{"CUSTOM_OTHER"},
		Steps: []baremetal.RunbookStep{{Interface: "bios", Step: "factory_reset", Args: map[string]any{}}}}
	if err := s.Runbooks().Create(ctx, rb); err != nil {
		t.Fatal(err)
	}
	if _, err := p.DownTo(ctx, version-1); err != nil {
		t.Fatalf("migrating down to %d: %v", version-1, err)
	}
	if _, err := s.Runbooks().Get(ctx, rb.UUID); err == nil {
		t.Fatalf("runbook read without its traits column at schema %d", version-1)
	}
	if _, err := p.UpTo(ctx, version); err != nil {
		t.Fatalf("migrating up to %d: %v", version, err)
	}
	got, err := s.Runbooks().Get(ctx, rb.UUID)
	if err != nil || !reflect.DeepEqual(got.Traits, []string{"CUSTOM_LEGACY"}) || got.Description != "" {
		t.Fatalf("runbook after down and up = %+v, %v; want its name as its one trait, no description", got, err)
	}
	gp, err := s.GetPort(ctx, port.UUID)
	if err != nil || gp.NotForDynamicPortgroup {
		t.Fatalf("port after down and up = %+v, %v; want it kept, available for dynamic port groups", gp, err)
	}
}

// checkInventoryMigration steps migration 3 (node_inventory) down and up
// on a database holding a node with an inventory: down drops the table
// and keeps the node, up brings back an empty, working table.
func checkInventoryMigration(t *testing.T, s *sqlstore.Store, p *goose.Provider) {
	t.Helper()
	ctx := context.Background()
	n := &baremetal.Node{Name: "inventoried"}
	if err := s.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveNodeInventory(ctx, n.UUID, &baremetal.NodeInventory{Inventory: []byte(`{"cpu":{"count":2}}`)}); err != nil {
		t.Fatalf("schema 3 cannot store an inventory: %v", err)
	}
	if _, err := p.DownTo(ctx, 2); err != nil {
		t.Fatalf("migrating down to 2: %v", err)
	}
	if _, err := s.GetNodeInventory(ctx, n.UUID); err == nil || errors.Is(err, baremetal.ErrNotFound) {
		t.Fatalf("inventory read after dropping its table = %v, want a database error", err)
	}
	// The node columns of later migrations are gone: count, not read.
	if c, err := s.CountNodes(ctx, baremetal.NodeFilter{}); err != nil || c != 2 {
		t.Fatalf("after migrating down to 2: %d nodes, %v; want 2 kept", c, err)
	}
	if _, err := p.UpTo(ctx, 3); err != nil {
		t.Fatalf("migrating up to 3: %v", err)
	}
	var nr *baremetal.InventoryNotRecordedError
	if _, err := s.GetNodeInventory(ctx, n.UUID); !errors.As(err, &nr) {
		t.Fatalf("inventory after down and up = %v, want InventoryNotRecordedError", err)
	}
	if err := s.SaveNodeInventory(ctx, n.UUID, &baremetal.NodeInventory{Inventory: []byte(`{"cpu":{"count":4}}`)}); err != nil {
		t.Fatalf("table unusable after up: %v", err)
	}
}

func TestMigrationsSQLite(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.db")
	s := openSQLite(t, path, nil)
	checkMigrations(t, s)
	// Opening an up-to-date database again is a no-op that keeps the data.
	if err := s.CreateNode(context.Background(), &baremetal.Node{Name: "kept"}); err != nil {
		t.Fatal(err)
	}
	again := openSQLite(t, path, nil)
	if _, err := again.GetNode(context.Background(), "kept"); err != nil {
		t.Fatalf("reopening lost data: %v", err)
	}
}

func TestMigrationsPostgres(t *testing.T) {
	checkMigrations(t, sqlstoretest.OpenPostgres(t, nil))
}

func TestSQLiteSynchronousFull(t *testing.T) {
	s, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "full.db"), sqlstore.Options{SynchronousFull: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	if err := s.CreateNode(context.Background(), &baremetal.Node{Name: "durable"}); err != nil {
		t.Fatal(err)
	}
	pragmas, err := sqlstore.PragmasForTest(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"journal_mode": "wal", "synchronous": "2", "foreign_keys": "1", "busy_timeout": "5000"}
	for k, v := range want {
		if pragmas[k] != v {
			t.Errorf("PRAGMA %s = %q, want %q", k, pragmas[k], v)
		}
	}
}

func TestSQLiteDefaultPragmas(t *testing.T) {
	s := openSQLite(t, filepath.Join(t.TempDir(), "normal.db"), nil)
	pragmas, err := sqlstore.PragmasForTest(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"journal_mode": "wal", "synchronous": "1", "foreign_keys": "1", "busy_timeout": "5000"}
	for k, v := range want {
		if pragmas[k] != v {
			t.Errorf("PRAGMA %s = %q, want %q", k, pragmas[k], v)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := sqlstore.OpenSQLite(context.Background(), "", sqlstore.Options{}); err == nil {
		t.Fatal("OpenSQLite with no path succeeded")
	}
	if _, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "missing-dir", "x", "a.db"), sqlstore.Options{}); err == nil {
		t.Fatal("OpenSQLite in a missing directory succeeded")
	}
	if _, err := sqlstore.OpenPostgres(context.Background(), "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2", sqlstore.Options{}); err == nil {
		t.Fatal("OpenPostgres to a closed port succeeded")
	}
}
