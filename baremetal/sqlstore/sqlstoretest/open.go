package sqlstoretest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/clock"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, for schema set-up
)

// EnvPostgresDSN names the environment variable holding the PostgreSQL
// connection string the tests use. Tests that need PostgreSQL skip when it
// is empty. CI sets it to the database on the test machine.
const EnvPostgresDSN = "ANVIL_TEST_POSTGRES_DSN"

// PostgresDSN returns a connection string for a new, empty schema of the
// database named by ANVIL_TEST_POSTGRES_DSN, dropped when t ends, so runs
// and tests never see each other's rows. It skips t when the variable is
// not set.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	base := os.Getenv(EnvPostgresDSN)
	if base == "" {
		t.Skipf("PostgreSQL test skipped: set %s to run it", EnvPostgresDSN)
	}
	db, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatalf("opening %s: %v", EnvPostgresDSN, err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "anvil_test_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := db.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		_ = db.Close()
		t.Fatalf("creating schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := db.ExecContext(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
		}
		_ = db.Close()
	})
	// Tests need no durability across a power cut; not waiting for the
	// WAL flush makes schema set-up several times faster.
	return withParam(WithSearchPath(base, schema), "synchronous_commit", "off")
}

// withParam adds a run-time parameter to a URL or key=value DSN.
func withParam(dsn, key, value string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		if u, err := url.Parse(dsn); err == nil {
			q := u.Query()
			q.Set(key, value)
			u.RawQuery = q.Encode()
			return u.String()
		}
	}
	return dsn + " " + key + "=" + value
}

// WithSearchPath returns dsn (a URL or key=value string) selecting schema.
func WithSearchPath(dsn, schema string) string {
	return withParam(dsn, "search_path", schema)
}

// OpenSQLite returns a fresh SQLite store in a file under t.TempDir(),
// closed when t ends.
func OpenSQLite(t testing.TB, clock clock.Clock) *sqlstore.Store {
	t.Helper()
	s, err := sqlstore.OpenSQLite(context.Background(), filepath.Join(t.TempDir(), "anvil.db"), sqlstore.Options{Clock: clock})
	if err != nil {
		t.Fatalf("OpenSQLite: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// OpenPostgres returns a store on a fresh PostgreSQL schema (see
// PostgresDSN), closed when t ends; it skips t without a database.
func OpenPostgres(t testing.TB, clock clock.Clock) *sqlstore.Store {
	t.Helper()
	dsn := PostgresDSN(t)
	s, err := sqlstore.OpenPostgres(context.Background(), dsn, sqlstore.Options{Clock: clock, MaxOpenConns: 4})
	if err != nil {
		t.Fatalf("OpenPostgres: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}
