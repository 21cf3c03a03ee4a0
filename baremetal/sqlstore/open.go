package sqlstore

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"hash/crc64"
	"io/fs"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/clock"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	"github.com/jmoiron/sqlx"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver
)

//go:embed migrations/sqlite/*.sql migrations/postgres/*.sql
var migrations embed.FS

// Options tune a Store. The zero value is ready to use.
type Options struct {
	// Clock stamps created_at, updated_at, provision_updated_at and
	// conductor keepalives, and decides liveness; nil means the system
	// clock.
	Clock clock.Clock

	// SynchronousFull makes SQLite fsync on every commit
	// (synchronous=FULL) instead of at checkpoints (synchronous=NORMAL, the
	// default). NORMAL in WAL mode never corrupts the database; it may
	// lose the last commits on a power cut (not on a process crash).
	SynchronousFull bool
	// BusyTimeout is how long SQLite waits for another process's write
	// lock before failing; 0 means 5 s.
	BusyTimeout time.Duration
	// MaxReadConns caps SQLite's pool of read-only connections; 0 means 4.
	MaxReadConns int
	// SingleProcess opens a SQLite file in exclusive locking mode: no
	// other process (nor a second store in this one) can use the file
	// while the store is open, and reads share the writer's connection.
	// In exchange every transaction skips the shared-memory locks, which
	// cuts the CPU cost of small writes by about a third. Use it for an
	// embedded conductor that owns its database.
	SingleProcess bool

	// MaxOpenConns caps PostgreSQL's connection pool; 0 means 16.
	MaxOpenConns int
}

// Store is the sqlx implementation of baremetal.Store for SQLite and
// PostgreSQL. Create it with OpenSQLite or OpenPostgres.
type Store struct {
	d dialect
	w *sqlx.DB // writes (one connection on SQLite)
	r *sqlx.DB // reads (read-only pool on a SQLite file; w otherwise)
	// ka is the conductors' keepalive connection: on PostgreSQL a pool
	// of one of its own, so that a keepalive never waits for a
	// connection behind the node work filling w (a keepalive late by
	// the heartbeat timeout makes a live conductor dead to its peers,
	// which break its reservations); w on SQLite, whose single writer
	// serialises every write anyway.
	ka    *sqlx.DB
	clock clock.Clock
	st    statements
	batch *batcher // SQLite group commit; nil on PostgreSQL

	subsMu  sync.RWMutex
	subs    map[int]func(baremetal.NodeChange)
	nextSub int
}

// OpenSQLite opens (creating if needed) the SQLite database at path, or a
// private in-memory database when path is ":memory:", and applies the
// embedded migrations.
//
// SQLite allows one writer at a time. The store gives all writes a single
// connection, so goroutines of this process queue in Go instead of failing
// with SQLITE_BUSY, and serves reads from a separate read-only pool that
// WAL mode lets run alongside the writer. Another process writing the same
// file is waited for up to Options.BusyTimeout.
func OpenSQLite(ctx context.Context, path string, opts Options) (*Store, error) {
	if path == "" {
		return nil, &baremetal.InvalidFieldError{Kind: "store", Field: "path", Expected: "a file path or \":memory:\""}
	}
	busy := opts.BusyTimeout
	if busy <= 0 {
		busy = 5 * time.Second
	}
	sync := "NORMAL"
	if opts.SynchronousFull {
		sync = "FULL"
	}
	params := url.Values{}
	params.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	params.Add("_pragma", "foreign_keys(1)")
	params.Add("_pragma", "synchronous("+sync+")")
	// Statement journals and sort files stay in memory, and the writer
	// keeps a larger page cache (64 MiB) so big enrollments and the
	// index pages of a large fleet do not go back to the file.
	params.Add("_pragma", "temp_store(MEMORY)")
	params.Add("_pragma", "cache_size(-65536)")
	params.Set("_txlock", "immediate")

	memory := path == ":memory:"
	var dsn string
	if memory {
		dsn = ":memory:?" + params.Encode()
	} else {
		if opts.SingleProcess {
			// Must precede the switch to WAL so the WAL index lives in
			// heap memory instead of a shared-memory file.
			params.Add("_pragma", "locking_mode(EXCLUSIVE)")
		}
		params.Add("_pragma", "journal_mode(WAL)")
		dsn = "file:" + path + "?" + params.Encode()
	}
	w := openSQLite(dsn)
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	if err := w.PingContext(ctx); err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("sqlstore: opening sqlite %s: %w", path, err)
	}
	r := w
	if !memory && !opts.SingleProcess {
		rp := url.Values{}
		rp.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
		rp.Add("_pragma", "query_only(1)")
		r = openSQLite("file:" + path + "?" + rp.Encode())
		n := opts.MaxReadConns
		if n <= 0 {
			n = 4
		}
		r.SetMaxOpenConns(n)
		r.SetMaxIdleConns(n)
	}
	s, err := newStore(ctx, sqliteDialect, w, r, opts)
	if err != nil {
		if r != w {
			_ = r.Close()
		}
		_ = w.Close()
		return nil, err
	}
	s.batch = &batcher{db: w}
	return s, nil
}

// OpenPostgres connects to PostgreSQL through pgx's database/sql driver
// and applies the embedded migrations (under a session advisory lock, so
// several conductors may start at once). dsn is a pgx connection string
// (URL or key=value); a search_path parameter selects the schema.
func OpenPostgres(ctx context.Context, dsn string, opts Options) (*Store, error) {
	db, err := sqlx.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: opening postgres: %w", err)
	}
	n := opts.MaxOpenConns
	if n <= 0 {
		n = 16
	}
	db.SetMaxOpenConns(n)
	db.SetMaxIdleConns(n)
	db.SetConnMaxIdleTime(5 * time.Minute)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("sqlstore: connecting to postgres: %w", err)
	}
	s, err := newStore(ctx, postgresDialect, db, db, opts)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	ka, err := sqlx.Open("pgx", dsn)
	if err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("sqlstore: opening postgres: %w", err)
	}
	ka.SetMaxOpenConns(1)
	ka.SetMaxIdleConns(1)
	s.ka = ka
	return s, nil
}

func newStore(ctx context.Context, d dialect, w, r *sqlx.DB, opts Options) (*Store, error) {
	if err := migrate(ctx, d, w.DB); err != nil {
		return nil, err
	}
	clk := opts.Clock
	if clk == nil {
		clk = clock.System()
	}
	s := &Store{d: d, w: w, r: r, ka: w, clock: clk, subs: map[int]func(baremetal.NodeChange){}}
	if err := s.prepare(ctx); err != nil {
		s.st.close()
		return nil, err
	}
	return s, nil
}

// migrationProvider returns the goose provider of the dialect's embedded
// migrations. goose's provider API keeps no global state.
func migrationProvider(ctx context.Context, d dialect, db *sql.DB) (*goose.Provider, error) {
	sub, err := fs.Sub(migrations, "migrations/"+d.name)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: migrations for %s: %w", d.name, err)
	}
	var popts []goose.ProviderOption
	gd := goose.DialectSQLite3
	if d.name == "postgres" {
		gd = goose.DialectPostgres
		// The advisory lock is database-wide; keying it by schema lets
		// stores in different schemas migrate at once while conductors
		// sharing a schema still take turns.
		var schema string
		if err := db.QueryRowContext(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
			return nil, fmt.Errorf("sqlstore: reading the current schema: %w", err)
		}
		lockID := int64(crc64.Checksum([]byte("anvil-migrations:"+schema), crc64.MakeTable(crc64.ECMA)) >> 1)
		locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(lockID), lock.WithLockTimeout(1, 300))
		if err != nil {
			return nil, fmt.Errorf("sqlstore: migration lock: %w", err)
		}
		popts = append(popts, goose.WithSessionLocker(locker))
	}
	p, err := goose.NewProvider(gd, db, sub, popts...)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: migrations for %s: %w", d.name, err)
	}
	return p, nil
}

func migrate(ctx context.Context, d dialect, db *sql.DB) error {
	p, err := migrationProvider(ctx, d, db)
	if err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil && !errors.Is(err, goose.ErrNoNextVersion) {
		return fmt.Errorf("sqlstore: applying %s migrations: %w", d.name, err)
	}
	return nil
}

// SchemaVersion returns the version of the last migration applied.
func (s *Store) SchemaVersion(ctx context.Context) (int64, error) {
	p, err := migrationProvider(ctx, s.d, s.w.DB)
	if err != nil {
		return 0, err
	}
	v, err := p.GetDBVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("sqlstore: reading schema version: %w", err)
	}
	return v, nil
}

// Dialect returns "sqlite" or "postgres".
func (s *Store) Dialect() string { return s.d.name }

// Close closes the store's statements and connections.
func (s *Store) Close() error {
	s.st.close()
	var err, kerr error
	if s.r != s.w {
		err = s.r.Close()
	}
	if s.ka != s.w {
		kerr = s.ka.Close()
	}
	return errors.Join(err, kerr, s.w.Close())
}

// now returns the store clock's time, truncated to the stored precision.
func (s *Store) now() time.Time { return s.clock.Now().UTC().Truncate(time.Microsecond) }

// inTx runs fn in a write transaction and commits it when fn succeeds.
func (s *Store) inTx(ctx context.Context, fn func(tx *sqlx.Tx) error) error {
	tx, err := s.w.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlstore: begin: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlstore: commit: %w", err)
	}
	return nil
}

// SubscribeNodeChanges implements baremetal.NodeChangeNotifier.
func (s *Store) SubscribeNodeChanges(fn func(baremetal.NodeChange)) (cancel func()) {
	s.subsMu.Lock()
	id := s.nextSub
	s.nextSub++
	s.subs[id] = fn
	s.subsMu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.subsMu.Lock()
			delete(s.subs, id)
			s.subsMu.Unlock()
		})
	}
}

// notify calls the subscribers after a committed write.
func (s *Store) notify(changes ...baremetal.NodeChange) {
	s.subsMu.RLock()
	if len(s.subs) == 0 {
		s.subsMu.RUnlock()
		return
	}
	fns := make([]func(baremetal.NodeChange), 0, len(s.subs))
	for _, fn := range s.subs {
		fns = append(fns, fn)
	}
	s.subsMu.RUnlock()
	for _, c := range changes {
		for _, fn := range fns {
			fn(c)
		}
	}
}

// hasSubscribers reports whether building change records is worth it.
func (s *Store) hasSubscribers() bool {
	s.subsMu.RLock()
	defer s.subsMu.RUnlock()
	return len(s.subs) > 0
}

// isUUID reports whether s has the canonical 8-4-4-4-12 hex form.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
				return false
			}
		}
	}
	return true
}

// Compile-time checks.
var (
	_ baremetal.Store              = (*Store)(nil)
	_ baremetal.NodeChangeNotifier = (*Store)(nil)
	_ baremetal.RecordingNodeStore = (*Store)(nil)
	_ baremetal.ReleasingNodeStore = (*Store)(nil)
)
