package sqlstore

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/jmoiron/sqlx"
)

// statements are the hot queries, prepared once at open.
type statements struct {
	all []*sqlx.Stmt

	getByUUID    *sqlx.Stmt // reader
	getByName    *sqlx.Stmt // reader
	portsOf      *sqlx.Stmt // reader: ports of a node uuid
	lockHolder   *sqlx.Stmt // writer: reservation, version of a uuid
	reserve      *sqlx.Stmt
	release      *sqlx.Stmt
	update       *sqlx.Stmt
	updateHeld   *sqlx.Stmt
	touch        *sqlx.Stmt
	insertFull   *sqlx.Stmt // insertNodesSQL(insertBatch)
	addHistory   *sqlx.Stmt // history entry of a node given by uuid, states filled from it
	addHistoryID *sqlx.Stmt // history entry of a node given by id, every value given
	// recordUpdate and recordUpdateHeld (PostgreSQL only) are update and
	// updateHeld with the history insert in the same statement.
	recordUpdate     *sqlx.Stmt
	recordUpdateHeld *sqlx.Stmt
	// updateRelease is updateHeld that also clears the reservation, and
	// recordUpdateRelease (PostgreSQL only) its form with the history
	// insert.
	updateRelease       *sqlx.Stmt
	recordUpdateRelease *sqlx.Stmt
	// insertOne is insertNodesSQL(1): enrolling one node at a time.
	insertOne *sqlx.Stmt

	// dynMu guards dyn, the prepared forms of queries built at run time
	// (SQLite only; pgx caches prepared statements by text itself).
	dynMu sync.Mutex
	dyn   map[string]*sqlx.Stmt
}

func (st *statements) close() {
	for _, s := range st.all {
		_ = s.Close()
	}
	st.all = nil
	st.dynMu.Lock()
	for _, s := range st.dyn {
		_ = s.Close()
	}
	st.dyn = nil
	st.dynMu.Unlock()
}

// maxDynStmts bounds the cache of prepared run-time queries: filters
// come from a fixed set of call sites, so a handful of texts recur.
const maxDynStmts = 64

// readStmt returns q (already in the dialect's form) prepared on the read
// pool, or nil to run it unprepared. A listing filter's SQL is rebuilt on
// every call but recurs with the same text (the concurrency-limit count
// of every verb, the periodic listings), and parsing it is a good part of
// a small query's cost on SQLite, whose driver keeps no statement cache;
// on PostgreSQL pgx caches prepared statements by text already.
func (s *Store) readStmt(ctx context.Context, q string) *sqlx.Stmt {
	if s.d.name != sqliteDialect.name {
		return nil
	}
	s.st.dynMu.Lock()
	defer s.st.dynMu.Unlock()
	if st, ok := s.st.dyn[q]; ok {
		return st
	}
	if len(s.st.dyn) >= maxDynStmts {
		return nil
	}
	st, err := s.r.PreparexContext(ctx, q)
	if err != nil {
		// The query itself reports the error when it runs unprepared.
		return nil
	}
	if s.st.dyn == nil {
		s.st.dyn = map[string]*sqlx.Stmt{}
	}
	s.st.dyn[q] = st
	return st
}

// updateSQL builds the compare-and-swap update of every caller-written
// column. provision_updated_at is stamped when either provision state
// changes and otherwise never moves back. release (with held) also clears
// the reservation the statement checks.
func (s *Store) updateSQL(held, release bool) string {
	var b strings.Builder
	b.WriteString("UPDATE nodes SET ")
	for _, c := range nodeCols {
		b.WriteString(c.name)
		b.WriteString(" = ?, ")
	}
	fmt.Fprintf(&b, "provision_updated_at = CASE WHEN provision_state <> ? OR COALESCE(target_provision_state, '') <> ? THEN CAST(? AS BIGINT) "+
		"ELSE NULLIF(%s(COALESCE(provision_updated_at, 0), COALESCE(CAST(? AS BIGINT), 0)), 0) END, ", s.d.greatest)
	if release {
		b.WriteString("reservation = NULL, ")
	}
	b.WriteString("version = version + 1, updated_at = ? WHERE uuid = ? AND version = ?")
	if held {
		b.WriteString(" AND reservation = ?")
	}
	b.WriteString(" RETURNING version, updated_at, provision_updated_at")
	return b.String()
}

// recordUpdateSQL builds, for PostgreSQL, the compare-and-swap update and
// the insert of the history row recording it as one statement (a
// data-modifying WITH): one round trip and one commit, and the row is
// inserted only when the update matched. Its parameters are the update's,
// then the history row's values without the node reference.
func (s *Store) recordUpdateSQL(held, release bool) string {
	upd := strings.TrimSuffix(s.updateSQL(held, release), " RETURNING version, updated_at, provision_updated_at")
	return "WITH u AS (" + upd + " RETURNING id, version, updated_at, provision_updated_at), " +
		"h AS (" + historyInsert + "SELECT ?, ?, ?, ?, ?, ?, CAST(? AS BIGINT), CAST(? AS VARCHAR(255)), CAST(? AS VARCHAR(255)), CAST(? AS BIGINT), u.id FROM u RETURNING id) " +
		"SELECT u.version, u.updated_at, u.provision_updated_at, h.id FROM u, h"
}

// historyInsert is the head of every insert of a history entry.
const historyInsert = "INSERT INTO node_history (event, event_type, severity, message, conductor, user_name, created_at, " +
	"state, target_provision_state, duration_us, node_id) "

func (s *Store) prepare(ctx context.Context) error {
	prep := func(db *sqlx.DB, q string) (*sqlx.Stmt, error) {
		st, err := db.PreparexContext(ctx, s.d.q(q))
		if err != nil {
			return nil, fmt.Errorf("sqlstore: preparing %q: %w", q, err)
		}
		s.st.all = append(s.st.all, st)
		return st, nil
	}
	var err error
	sel := "SELECT " + nodeSelectList + " FROM nodes "
	if s.st.getByUUID, err = prep(s.r, sel+"WHERE uuid = ?"); err != nil {
		return err
	}
	if s.st.getByName, err = prep(s.r, sel+"WHERE name = ?"); err != nil {
		return err
	}
	if s.st.portsOf, err = prep(s.r, portSelect+"WHERE n.uuid = ? ORDER BY p.id"); err != nil {
		return err
	}
	if s.st.lockHolder, err = prep(s.w, "SELECT reservation, version FROM nodes WHERE uuid = ?"); err != nil {
		return err
	}
	if s.st.reserve, err = prep(s.w, "UPDATE nodes SET reservation = ? WHERE uuid = ? AND reservation IS NULL RETURNING "+nodeSelectList); err != nil {
		return err
	}
	if s.st.release, err = prep(s.w, "UPDATE nodes SET reservation = NULL WHERE uuid = ? AND reservation = ?"); err != nil {
		return err
	}
	if s.st.update, err = prep(s.w, s.updateSQL(false, false)); err != nil {
		return err
	}
	if s.st.updateHeld, err = prep(s.w, s.updateSQL(true, false)); err != nil {
		return err
	}
	if s.st.updateRelease, err = prep(s.w, s.updateSQL(true, true)); err != nil {
		return err
	}
	if s.st.touch, err = prep(s.w, "UPDATE nodes SET provision_updated_at = ? WHERE uuid = ? RETURNING provision_state, COALESCE(target_provision_state, ''), version"); err != nil {
		return err
	}
	if s.st.insertFull, err = prep(s.w, insertNodesSQL(insertBatch)); err != nil {
		return err
	}
	if s.st.insertOne, err = prep(s.w, insertNodesSQL(1)); err != nil {
		return err
	}
	// The state, target and duration left NULL are the node's as the
	// entry is written: its states and the time since their stamp.
	addHist := fmt.Sprintf(historyInsert+"SELECT ?, ?, ?, ?, ?, ?, ?, COALESCE(?, provision_state), COALESCE(?, target_provision_state), "+
		"COALESCE(CAST(? AS BIGINT), CASE WHEN provision_updated_at IS NULL THEN NULL ELSE %s(CAST(? AS BIGINT) - provision_updated_at, 0) END), id "+
		"FROM nodes WHERE uuid = ? RETURNING id, COALESCE(state, ''), COALESCE(target_provision_state, ''), duration_us", s.d.greatest)
	if s.st.addHistory, err = prep(s.w, addHist); err != nil {
		return err
	}
	if s.st.addHistoryID, err = prep(s.w, historyInsert+"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"); err != nil {
		return err
	}
	if s.d.name == postgresDialect.name {
		if s.st.recordUpdate, err = prep(s.w, s.recordUpdateSQL(false, false)); err != nil {
			return err
		}
		if s.st.recordUpdateHeld, err = prep(s.w, s.recordUpdateSQL(true, false)); err != nil {
			return err
		}
		if s.st.recordUpdateRelease, err = prep(s.w, s.recordUpdateSQL(true, true)); err != nil {
			return err
		}
	}
	return nil
}
