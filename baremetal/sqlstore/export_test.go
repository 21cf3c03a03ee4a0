package sqlstore

import (
	"context"

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
