package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"

	"github.com/jmoiron/sqlx"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// sqliteUnavailable marks an error of SQLite that says the database file
// could not be written or read, not that the statement was wrong: a full
// disk (SQLITE_FULL), an I/O error (SQLITE_IOERR, such as a write the
// file system refused), a database or file that turned read-only
// (SQLITE_READONLY), or a file that cannot be opened (SQLITE_CANTOPEN).
// Such a call may well succeed once the disk has room or the file can be
// written again, so baremetal.IsStoreUnavailable reports it (through the
// Unavailable method) and the conductor retries what it interrupted (a
// release, a state write) as it does when PostgreSQL is out of reach.
// It unwraps to the driver's *sqlite.Error, which the constraint
// classification reads.
type sqliteUnavailable struct{ err error }

func (e *sqliteUnavailable) Error() string     { return e.err.Error() }
func (e *sqliteUnavailable) Unwrap() error     { return e.err }
func (e *sqliteUnavailable) Unavailable() bool { return true }

// sqliteFault marks err when it is one of SQLite's storage faults.
func sqliteFault(err error) error {
	var se *sqlite.Error
	if err == nil || !errors.As(err, &se) {
		return err
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN:
		return &sqliteUnavailable{err: err}
	}
	return err
}

// openSQLite opens dsn with the sqlite driver, its connections' errors
// marked by sqliteFault.
func openSQLite(dsn string) *sqlx.DB {
	return sqlx.NewDb(sql.OpenDB(faultConnector{dsn: dsn, d: &sqlite.Driver{}}), "sqlite")
}

type faultConnector struct {
	dsn string
	d   *sqlite.Driver
}

func (c faultConnector) Connect(ctx context.Context) (driver.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	conn, err := c.d.Open(c.dsn)
	if err != nil {
		return nil, sqliteFault(err)
	}
	return &faultConn{c: conn}, nil
}

func (c faultConnector) Driver() driver.Driver { return c.d }

// faultConn is a SQLite connection whose errors go through sqliteFault.
// It offers the context-aware interfaces the driver's connection offers.
type faultConn struct{ c driver.Conn }

var (
	_ driver.ConnBeginTx        = (*faultConn)(nil)
	_ driver.ConnPrepareContext = (*faultConn)(nil)
	_ driver.ExecerContext      = (*faultConn)(nil)
	_ driver.QueryerContext     = (*faultConn)(nil)
	_ driver.Pinger             = (*faultConn)(nil)
	_ driver.SessionResetter    = (*faultConn)(nil)
	_ driver.Validator          = (*faultConn)(nil)
)

func (f *faultConn) Prepare(query string) (driver.Stmt, error) {
	return f.PrepareContext(context.Background(), query)
}

func (f *faultConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	st, err := f.c.(driver.ConnPrepareContext).PrepareContext(ctx, query)
	if err != nil {
		return nil, sqliteFault(err)
	}
	return &faultStmt{s: st}, nil
}

func (f *faultConn) Close() error { return f.c.Close() }

func (f *faultConn) Begin() (driver.Tx, error) {
	return f.BeginTx(context.Background(), driver.TxOptions{})
}

func (f *faultConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := f.c.(driver.ConnBeginTx).BeginTx(ctx, opts)
	if err != nil {
		return nil, sqliteFault(err)
	}
	return faultTx{t: tx}, nil
}

func (f *faultConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	r, err := f.c.(driver.ExecerContext).ExecContext(ctx, query, args)
	return r, sqliteFault(err)
}

func (f *faultConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	r, err := f.c.(driver.QueryerContext).QueryContext(ctx, query, args)
	if err != nil {
		return nil, sqliteFault(err)
	}
	return faultRows{r}, nil
}

func (f *faultConn) Ping(ctx context.Context) error {
	return sqliteFault(f.c.(driver.Pinger).Ping(ctx))
}

func (f *faultConn) ResetSession(ctx context.Context) error {
	return f.c.(driver.SessionResetter).ResetSession(ctx)
}

func (f *faultConn) IsValid() bool { return f.c.(driver.Validator).IsValid() }

type faultStmt struct{ s driver.Stmt }

var (
	_ driver.StmtExecContext  = (*faultStmt)(nil)
	_ driver.StmtQueryContext = (*faultStmt)(nil)
)

func (f *faultStmt) Close() error  { return f.s.Close() }
func (f *faultStmt) NumInput() int { return f.s.NumInput() }

// Exec and Query are driver.Stmt's context-free forms, which
// database/sql never calls on a statement that has the context-aware
// ones: they run those.
func (f *faultStmt) Exec(args []driver.Value) (driver.Result, error) {
	return f.ExecContext(context.Background(), named(args))
}

func (f *faultStmt) Query(args []driver.Value) (driver.Rows, error) {
	return f.QueryContext(context.Background(), named(args))
}

func named(args []driver.Value) []driver.NamedValue {
	out := make([]driver.NamedValue, len(args))
	for i, v := range args {
		out[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	return out
}

func (f *faultStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	r, err := f.s.(driver.StmtExecContext).ExecContext(ctx, args)
	return r, sqliteFault(err)
}

func (f *faultStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	r, err := f.s.(driver.StmtQueryContext).QueryContext(ctx, args)
	if err != nil {
		return nil, sqliteFault(err)
	}
	return faultRows{r}, nil
}

// faultRows passes a result's rows on; an error stepping to the next row
// or closing them (an UPDATE ... RETURNING that cannot write fails when
// its statement completes, which database/sql's Row.Scan reports from
// Close) goes through sqliteFault.
type faultRows struct{ r driver.Rows }

func (f faultRows) Columns() []string { return f.r.Columns() }
func (f faultRows) Close() error      { return sqliteFault(f.r.Close()) }
func (f faultRows) Next(dest []driver.Value) error {
	err := f.r.Next(dest)
	if err == nil || err == io.EOF {
		return err
	}
	return sqliteFault(err)
}

type faultTx struct{ t driver.Tx }

func (f faultTx) Commit() error   { return sqliteFault(f.t.Commit()) }
func (f faultTx) Rollback() error { return sqliteFault(f.t.Rollback()) }
