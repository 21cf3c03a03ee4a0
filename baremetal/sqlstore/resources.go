package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/internal/jsonexact"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
)

// This file holds what the portgroup, allocation, deploy template and
// runbook stores share: JSON columns, identities, markers, the
// compare-and-swap update and the classification of errors.

// encodeJSON encodes v for a nullable JSON text column: nil stays NULL.
func encodeJSON(kind, ident, field string, v any, isNil bool) (any, error) {
	if isNil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, &baremetal.InvalidFieldError{Kind: kind, Ident: ident, Field: field, Expected: "a JSON-encodable value", Err: err}
	}
	if err := checkText(&baremetal.Node{UUID: ident}, field, string(b), 0); err != nil {
		return nil, &baremetal.InvalidFieldError{Kind: kind, Ident: ident, Field: field, Expected: "valid UTF-8 text without NUL bytes"}
	}
	return string(b), nil
}

// encodeMap encodes a JSON object column.
func encodeMap(kind, ident, field string, m map[string]any) (any, error) {
	return encodeJSON(kind, ident, field, m, m == nil)
}

// encodeList encodes a JSON list-of-strings column.
func encodeList(kind, ident, field string, l []string) (any, error) {
	return encodeJSON(kind, ident, field, l, l == nil)
}

// decodeExact decodes a JSON column into v keeping numbers exact.
func decodeExact(kind, ident, field string, ns sql.NullString, v any) error {
	if !ns.Valid {
		return nil
	}
	if err := jsonexact.Decode([]byte(ns.String), v); err != nil {
		return fmt.Errorf("sqlstore: %s %s: decoding %s: %w", kind, ident, field, err)
	}
	return nil
}

// newIdentity checks or generates the UUID of a new object, lower case.
func newIdentity(kind, given string) (string, error) {
	if given == "" {
		return uuid.NewString(), nil
	}
	if !isUUID(given) {
		return "", &baremetal.InvalidFieldError{Kind: kind, Ident: given, Field: "uuid", Expected: "a UUID"}
	}
	return strings.ToLower(given), nil
}

// identWhere returns the condition and argument selecting an object by
// UUID or, when ident is not a UUID, by name (column prefix p).
func identWhere(p, ident string) (string, any) {
	if isUUID(ident) {
		return p + "uuid = ?", strings.ToLower(ident)
	}
	return p + "name = ?", ident
}

// markerID resolves a page marker (a UUID) to the internal id of an
// object of table, or 0 for no marker.
func (s *Store) markerID(ctx context.Context, table, kind, marker string) (int64, error) {
	if marker == "" {
		return 0, nil
	}
	var id int64
	err := s.r.QueryRowxContext(ctx, s.d.q("SELECT id FROM "+table+" WHERE uuid = ?"), strings.ToLower(marker)).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, &baremetal.InvalidFieldError{Kind: "page", Field: "marker", Expected: "the UUID of an existing " + kind}
	}
	if err != nil {
		return 0, fmt.Errorf("sqlstore: resolving marker: %w", err)
	}
	return id, nil
}

// pageClause appends the marker condition and returns the ORDER BY and
// LIMIT of a listing (column prefix p).
func (s *Store) pageClause(ctx context.Context, table, kind, p string, page baremetal.Page, conds []string, args []any) (string, []any, error) {
	if page.Limit < 0 {
		return "", nil, &baremetal.InvalidFieldError{Kind: "page", Field: "limit", Expected: "zero (no limit) or a positive number"}
	}
	id, err := s.markerID(ctx, table, kind, page.Marker)
	if err != nil {
		return "", nil, err
	}
	if id != 0 {
		conds = append(conds, p+"id > ?")
		args = append(args, id)
	}
	q := ""
	if len(conds) > 0 {
		q = " WHERE " + strings.Join(conds, " AND ")
	}
	q += " ORDER BY " + p + "id"
	if page.Limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", page.Limit)
	}
	return q, args, nil
}

// nodeIDOf resolves a node UUID to its internal id inside tx.
func (s *Store) nodeIDOf(ctx context.Context, tx *sqlx.Tx, kind, ident, nodeUUID string) (int64, error) {
	if !isUUID(nodeUUID) {
		return 0, &baremetal.InvalidFieldError{Kind: kind, Ident: ident, Field: "node_uuid", Expected: "the UUID of an existing node"}
	}
	var id int64
	err := tx.QueryRowxContext(ctx, s.d.q("SELECT id FROM nodes WHERE uuid = ?"), strings.ToLower(nodeUUID)).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, &baremetal.NotFoundError{Kind: "node", Ident: nodeUUID}
	}
	return id, err
}

// casUpdate runs an UPDATE of table's row uuid guarded by version inside
// tx (set is "col = ?, ..." and args its values) and returns the new
// version, or a *NotFoundError or *ConflictError.
func (s *Store) casUpdate(ctx context.Context, tx *sqlx.Tx, kind, table, uid string, version int64, set string, args []any) (int64, error) {
	args = append(args, uid, version)
	var v int64
	err := tx.QueryRowxContext(ctx, s.d.q("UPDATE "+table+" SET "+set+", version = version + 1 WHERE uuid = ? AND version = ? RETURNING version"), args...).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		var actual int64
		if err := tx.QueryRowxContext(ctx, s.d.q("SELECT version FROM "+table+" WHERE uuid = ?"), uid).Scan(&actual); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return 0, &baremetal.NotFoundError{Kind: kind, Ident: uid}
			}
			return 0, err
		}
		return 0, &baremetal.ConflictError{Kind: kind, Ident: uid, Expected: version, Actual: actual}
	}
	return v, err
}

// typed reports whether err is one of the baremetal errors the stores
// return as they are.
func typed(err error) bool {
	var (
		nf  *baremetal.NotFoundError
		cf  *baremetal.ConflictError
		ife *baremetal.InvalidFieldError
		de  *baremetal.DuplicateError
		ne  *baremetal.PortgroupNotEmptyError
	)
	return errors.As(err, &nf) || errors.As(err, &cf) || errors.As(err, &ife) || errors.As(err, &de) || errors.As(err, &ne)
}

// uniqueField is one unique column of a table and the value written.
type uniqueField struct {
	field, column string
	value         any
}

// explainDuplicate finds which unique field of the object uid is taken by
// another row of table after a unique violation.
func (s *Store) explainDuplicate(ctx context.Context, kind, table, uid string, isNew bool, fields []uniqueField, cause error) error {
	if isNew {
		var one int
		if s.w.QueryRowxContext(ctx, s.d.q("SELECT 1 FROM "+table+" WHERE uuid = ?"), uid).Scan(&one) == nil {
			return &baremetal.DuplicateError{Kind: kind, Field: "uuid", Value: uid}
		}
	}
	for _, f := range fields {
		if f.value == nil {
			continue
		}
		var one int
		if s.w.QueryRowxContext(ctx, s.d.q("SELECT 1 FROM "+table+" WHERE "+f.column+" = ? AND uuid <> ?"), f.value, uid).Scan(&one) == nil {
			return &baremetal.DuplicateError{Kind: kind, Field: f.field, Value: fmt.Sprint(f.value)}
		}
	}
	return fmt.Errorf("sqlstore: %s unique constraint violated: %w", kind, cause)
}

// finish maps the error of a write: typed errors as they are, unique
// violations explained, the rest wrapped.
func (s *Store) finish(ctx context.Context, err error, what string, explain func() error) error {
	if err == nil || typed(err) {
		return err
	}
	if classify(err) == uniqueViolation && explain != nil {
		return explain()
	}
	return fmt.Errorf("sqlstore: %s: %w", what, err)
}

// deleteByUUID deletes table's row uuid or returns a *NotFoundError.
func (s *Store) deleteByUUID(ctx context.Context, kind, table, uid string) error {
	res, err := s.w.ExecContext(ctx, s.d.q("DELETE FROM "+table+" WHERE uuid = ?"), strings.ToLower(uid))
	if err != nil {
		return fmt.Errorf("sqlstore: deleting %s %s: %w", kind, uid, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return &baremetal.NotFoundError{Kind: kind, Ident: uid}
	}
	return nil
}
