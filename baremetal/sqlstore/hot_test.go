package sqlstore_test

import (
	"context"
	"slices"
	"testing"

	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/baremetal/sqlstore/sqlstoretest"
)

// TestPostgresReservationWritesAreHOT checks the PostgreSQL schema keeps
// reserve and release heap-only updates (migration 4): no index of the
// nodes table covers the reservation column, in its keys, expressions or
// predicate, and the table's fill factor leaves room on each page for
// the new row version. An index on reservation would make every
// operation's reserve and release add an entry to every node index, which
// only VACUUM removes.
func TestPostgresReservationWritesAreHOT(t *testing.T) {
	s := sqlstoretest.OpenPostgres(t, nil)
	ctx := context.Background()
	idx, err := sqlstore.QueryStringsForTest(ctx, s, `SELECT i.indexrelid::regclass::text FROM pg_index i
		WHERE i.indrelid = 'nodes'::regclass AND (
			EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) AND a.attname = 'reservation')
			OR COALESCE(pg_get_expr(i.indpred, i.indrelid), '') LIKE '%reservation%'
			OR COALESCE(pg_get_expr(i.indexprs, i.indrelid), '') LIKE '%reservation%')`)
	if err != nil {
		t.Fatal(err)
	}
	if len(idx) > 0 {
		t.Errorf("indexes covering nodes.reservation: %v; reserve and release would not be HOT updates", idx)
	}
	opts, err := sqlstore.QueryStringsForTest(ctx, s, `SELECT unnest(reloptions) FROM pg_class WHERE oid = 'nodes'::regclass`)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(opts, "fillfactor=70") {
		t.Errorf("nodes reloptions = %v, want fillfactor=70", opts)
	}
}
