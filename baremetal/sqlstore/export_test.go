package sqlstore

import (
	"context"
	"strings"

	"github.com/anvilmetal/anvil/baremetal"

	"github.com/pressly/goose/v3"
)

// MigrationsForTest returns the goose provider of the store's database, so
// the external tests can run migrations down and up again.
func MigrationsForTest(ctx context.Context, s *Store) (*goose.Provider, error) {
	return migrationProvider(ctx, s.d, s.w.DB)
}

// PragmasForTest reads the SQLite settings of the writer connection.
func PragmasForTest(ctx context.Context, s *Store) (map[string]string, error) {
	out := map[string]string{}
	for _, p := range []string{"journal_mode", "synchronous", "foreign_keys", "busy_timeout"} {
		var v string
		if err := s.w.QueryRowContext(ctx, "PRAGMA "+p).Scan(&v); err != nil {
			return nil, err
		}
		out[p] = v
	}
	return out, nil
}

// ExplainListForTest returns SQLite's query plan of ListNodes for f.
func ExplainListForTest(ctx context.Context, s *Store, f baremetal.NodeFilter, page baremetal.Page) (string, error) {
	where, args, err := s.where(ctx, f, page)
	if err != nil {
		return "", err
	}
	rows, err := s.r.QueryContext(ctx, "EXPLAIN QUERY PLAN SELECT "+nodeSelectList+" FROM nodes"+where+" ORDER BY id LIMIT 100", args...)
	if err != nil {
		return "", err
	}
	defer func() { _ = rows.Close() }()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			return "", err
		}
		plan = append(plan, detail)
	}
	return strings.Join(plan, "; "), rows.Err()
}

// QueryStringsForTest runs q on the writer connection and returns the
// first column of every row as text.
func QueryStringsForTest(ctx context.Context, s *Store, q string) ([]string, error) {
	var out []string
	err := s.w.SelectContext(ctx, &out, q)
	return out, err
}

// HoldConnsForTest takes n connections of the store's write pool and
// keeps them until release is called, as node work filling the pool
// does.
func HoldConnsForTest(ctx context.Context, s *Store, n int) (release func(), err error) {
	var held []interface{ Close() error }
	release = func() {
		for _, c := range held {
			_ = c.Close()
		}
	}
	for range n {
		c, err := s.w.Conn(ctx)
		if err != nil {
			release()
			return nil, err
		}
		held = append(held, c)
	}
	return release, nil
}
