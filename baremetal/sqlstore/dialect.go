package sqlstore

import (
	"errors"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jmoiron/sqlx"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// dialect holds what differs between SQLite and PostgreSQL.
type dialect struct {
	// name is "sqlite" or "postgres", as goose and errors name it.
	name string
	// bind is the placeholder style sqlx rewrites "?" into.
	bind int
	// greatest is the scalar maximum function.
	greatest string
	// collate is appended to text sort expressions so both databases
	// order text by its bytes (SQLite's default; PostgreSQL's "C").
	collate string
}

var (
	sqliteDialect   = dialect{name: "sqlite", bind: sqlx.QUESTION, greatest: "max"}
	postgresDialect = dialect{name: "postgres", bind: sqlx.DOLLAR, greatest: "GREATEST", collate: ` COLLATE "C"`}
)

// q rewrites a query written with "?" placeholders for the dialect.
func (d dialect) q(query string) string { return sqlx.Rebind(d.bind, query) }

// constraintKind classifies a database error by its structured code (never
// by its message).
type constraintKind int

const (
	notConstraint constraintKind = iota
	uniqueViolation
	foreignKeyViolation
)

func classify(err error) constraintKind {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
			return uniqueViolation
		case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY, sqlite3.SQLITE_CONSTRAINT_TRIGGER:
			// The triggers of the schema keep references SQLite cannot
			// declare as foreign keys (a node's chassis).
			return foreignKeyViolation
		}
		return notConstraint
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "23505":
			return uniqueViolation
		case "23503":
			return foreignKeyViolation
		}
	}
	return notConstraint
}
