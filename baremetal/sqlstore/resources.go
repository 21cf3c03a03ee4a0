package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/internal/jsonexact"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
)

// This file holds what the resource stores share beside the generic
// operations of crud.go: JSON columns, identities, node references and
// the typed errors returned as they are.

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

// jsonValue is a model field bound for a JSON column.
type jsonValue struct {
	name string
	v    any
}

// encodeColumns encodes model fields for JSON columns of the object
// ident of kind, in order: a nil map or slice stays NULL.
func encodeColumns(kind, ident string, vals ...jsonValue) ([]any, error) {
	out := make([]any, len(vals))
	for i, jv := range vals {
		rv := reflect.ValueOf(jv.v)
		isNil := jv.v == nil || ((rv.Kind() == reflect.Map || rv.Kind() == reflect.Slice) && rv.IsNil())
		v, err := encodeJSON(kind, ident, jv.name, jv.v, isNil)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// jsonColumn is a JSON column of a row and the model field it decodes
// into.
type jsonColumn struct {
	name string
	ns   sql.NullString
	dst  any
}

// decodeColumns decodes the JSON columns of the row ident of kind, in
// order, keeping numbers exact.
func decodeColumns(kind, ident string, cols ...jsonColumn) error {
	for _, c := range cols {
		if err := decodeExact(kind, ident, c.name, c.ns, c.dst); err != nil {
			return err
		}
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

// typed reports whether err is one of the baremetal errors the stores
// return as they are.
func typed(err error) bool {
	var (
		nf  *baremetal.NotFoundError
		cf  *baremetal.ConflictError
		ife *baremetal.InvalidFieldError
		de  *baremetal.DuplicateError
		ne  *baremetal.PortgroupNotEmptyError
		ce  *baremetal.ChassisNotEmptyError
	)
	return errors.As(err, &nf) || errors.As(err, &cf) || errors.As(err, &ife) || errors.As(err, &de) ||
		errors.As(err, &ne) || errors.As(err, &ce)
}
