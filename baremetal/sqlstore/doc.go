// Package sqlstore keeps Anvil's nodes, ports, portgroups, allocations,
// deploy templates, runbooks, chassis, volume connectors and targets,
// conductors, node history and inspection inventories in SQL through
// sqlx: SQLite (the embedded
// default, pure Go through modernc.org/sqlite, no cgo) or PostgreSQL
// (through pgx's database/sql driver) for several conductors on several
// hosts. It implements baremetal.Store and the optional
// baremetal.NodeChangeNotifier.
//
// Opening a store applies the embedded, versioned migrations (pressly/goose,
// one directory per dialect) so a fresh database is ready at once and an
// older one is brought up to date.
//
// # SQLite
//
// The database runs in WAL mode with foreign keys on, a busy timeout, and
// synchronous=NORMAL (Options.SynchronousFull selects FULL). SQLite has one
// writer at a time, so the store funnels every write through a single
// connection: goroutines queue in Go rather than failing with SQLITE_BUSY,
// and the hot statements (reserve, release, compare-and-swap update, get)
// are prepared once. Reads go to a separate read-only pool that WAL lets
// run next to the writer. Another process using the same file is waited
// for up to the busy timeout; write transactions start IMMEDIATE so they
// never deadlock on a lock upgrade. ":memory:" gives a private in-memory
// database on one connection, for tests.
//
// # PostgreSQL
//
// The connection string is pgx's (URL or key=value). A search_path
// parameter selects the schema, which is how tests give every run its own.
// Migrations run under goose's session advisory lock, so conductors can
// start together.
//
// # Locks and fencing
//
// ReserveNode is one conditional UPDATE ... WHERE reservation IS NULL that
// returns the locked row; ReleaseNode clears the reservation only for its
// holder. UpdateNode is a compare-and-swap on the version column (and on
// the reservation when the writer claims one), so a writer that lost its
// lock or raced another gets a *baremetal.ConflictError and writes
// nothing. Timestamps are stored as Unix microseconds and read from the
// injected clock.
//
// # Resources
//
// Beside nodes and ports (hand-tuned: batched inserts, prepared hot
// statements, group commit), every resource table (portgroups,
// allocations, deploy templates, runbooks, chassis, volume connectors
// and targets) goes through one generic create, get, list, update and
// delete (crud.go): a resource describes its table once (columns, node
// link, unique constraints, rows that keep it from being deleted,
// sortable columns) and its accessor (Store.Portgroups, ...) binds that
// description and the conditions of its listing filter to the store as a
// baremetal.Collection. A new resource table is a migration, a row type,
// its argument and decode functions, a description and its accessor.
//
// A node names its chassis by UUID (nodes.chassis_uuid): PostgreSQL
// keeps the reference with a foreign key; SQLite, which cannot drop a
// column with one, with triggers that fail the same way.
//
// # Usage
//
//	s, err := sqlstore.OpenSQLite(ctx, "/var/lib/anvil/anvil.db", sqlstore.Options{})
//	if err != nil {
//		return err
//	}
//	defer s.Close()
//	n := &baremetal.Node{Name: "rack1-u07", Driver: "ipmi",
//		DriverInfo: map[string]any{"ipmi_address": "10.0.0.7", "ipmi_password": "..."}}
//	if err := s.CreateNode(ctx, n); err != nil {
//		return err
//	}
//	locked, err := baremetal.AcquireNode(ctx, s, n.UUID, "conductor-1", baremetal.DefaultLockPolicy())
//	if err != nil {
//		return err // a *baremetal.NodeLockedError names the holder
//	}
//	locked.PowerState = "power on"
//	if err := s.UpdateNode(ctx, locked, "conductor-1"); err != nil {
//		return err
//	}
//	return s.ReleaseNode(ctx, n.UUID, "conductor-1")
package sqlstore
