package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/jmoiron/sqlx"
)

// This file holds the one create, get, list, update and delete that the
// resource tables beside nodes and ports share: a resource describes
// its table once, as a crud value, and its Store accessor binds that
// description to the store as a baremetal.Collection. Writes are
// compare-and-swap on the version column, failures are the baremetal
// package's typed errors, and a failed write changes neither the store
// nor the caller's value.

// nodeLink says whether a resource's rows belong to a node (node_id).
type nodeLink int

const (
	// noNode: the table has no node_id.
	noNode nodeLink = iota
	// nodeRequired: every row names an existing node.
	nodeRequired
	// nodeOptional: a row may name a node ("" for none).
	nodeOptional
)

// record points at the fields every resource model has. node is nil for
// a resource without a node.
type record struct {
	id      *int64
	uuid    *string
	node    *string
	version *int64
	created *time.Time
	updated *time.Time
}

// rowBase holds the columns every resource row has; each row type
// embeds it, and the generic reads copy it into the model's record, so a
// row's decode maps only its own columns. NodeUUID is selected (as
// node_uuid, NULL for none) by the tables whose rows belong to a node.
type rowBase struct {
	ID        int64          `db:"id"`
	UUID      string         `db:"uuid"`
	NodeUUID  sql.NullString `db:"node_uuid"`
	CreatedAt int64          `db:"created_at"`
	UpdatedAt int64          `db:"updated_at"`
	Version   int64          `db:"version"`
}

// columns returns b; through embedding, every row type has it.
func (b *rowBase) columns() *rowBase { return b }

// baseRow is a row type embedding rowBase (a pointer to it).
type baseRow interface{ columns() *rowBase }

// recordIndex locates the fields of a record in a model struct, found by
// their names: ID, UUID, NodeUUID, Version, CreatedAt and UpdatedAt.
type recordIndex struct {
	id, uuid, node, version, created, updated []int
}

// indexRecord finds the record fields of T (NodeUUID only withNode). A
// missing or mistyped field is a programming error: it panics when the
// package loads.
func indexRecord[T any](withNode bool) recordIndex {
	typ := reflect.TypeFor[T]()
	find := func(name string, want reflect.Type) []int {
		f, ok := typ.FieldByName(name)
		if !ok || f.Type != want {
			panic(fmt.Sprintf("sqlstore: %s has no field %s of type %s", typ, name, want))
		}
		return f.Index
	}
	i64, str, tm := reflect.TypeFor[int64](), reflect.TypeFor[string](), reflect.TypeFor[time.Time]()
	x := recordIndex{id: find("ID", i64), uuid: find("UUID", str), version: find("Version", i64),
		created: find("CreatedAt", tm), updated: find("UpdatedAt", tm)}
	if withNode {
		x.node = find("NodeUUID", str)
	}
	return x
}

// of returns the record of v, a pointer to the indexed struct type.
func (x recordIndex) of(v any) record {
	e := reflect.ValueOf(v).Elem()
	at := func(i []int) any { return e.FieldByIndex(i).Addr().Interface() }
	r := record{id: at(x.id).(*int64), uuid: at(x.uuid).(*string), version: at(x.version).(*int64),
		created: at(x.created).(*time.Time), updated: at(x.updated).(*time.Time)}
	if x.node != nil {
		r.node = at(x.node).(*string)
	}
	return r
}

// crud describes one resource table. T is the model type, R the row type
// sqlx scans a select into.
type crud[T, R any] struct {
	// kind names the resource in typed errors ("deploy_template"); noun
	// and plural in wrapped errors and messages ("deploy template").
	kind, noun, plural string
	// table is the SQL table; alias prefixes its columns in selectSQL
	// ("g." or "").
	table, alias string
	// selectSQL selects the row type's columns, joins included, up to
	// the WHERE clause.
	selectSQL string
	// byName lets get find a row by its name as well as its UUID.
	byName bool
	// node says whether rows carry node_id (resolved from the model's
	// node UUID inside the write's transaction).
	node nodeLink
	// cols are the columns written by create and update after uuid and
	// node_id, in the order args returns their values.
	cols []string
	// sortCols are the columns a listing may be sorted by (Page.SortKey),
	// each with its kind: 'i' a number or time, 't' text. nil keeps the
	// ID order and ignores the sort fields of Page.
	sortCols map[string]byte
	// clone, args and decode map the model: a deep copy, the validated
	// values of cols (args may normalise the copy it is given), and a
	// scanned row's own columns (row adds the rowBase ones; the value
	// decode returns with an error is discarded).
	clone  func(*T) *T
	args   func(*T) ([]any, error)
	decode func(*R) (*T, error)
	// unique lists the unique constraints a write may break, besides the
	// UUID, for explaining a unique violation; explain replaces the
	// whole explanation when set.
	unique  func(*T) []uniqueField
	explain func(ctx context.Context, s *Store, w *T, isNew bool, cause error) error
	// beforeUpdate runs inside an update's transaction, after the node is
	// resolved (nil for none): a refusal the row's own constraints do not
	// express.
	beforeUpdate func(ctx context.Context, s *Store, tx *sqlx.Tx, w *T, nodeID any) error
	// children, when set, refuses deleting a row that other rows still
	// reference.
	children *childRows
	// rec locates the model's record fields (set by newCrud).
	rec recordIndex
}

// newCrud completes a table description: it indexes the model's record
// fields.
func newCrud[T, R any](c crud[T, R]) *crud[T, R] {
	c.rec = indexRecord[T](c.node != noNode)
	if _, ok := any(new(R)).(baseRow); !ok {
		panic(fmt.Sprintf("sqlstore: %s does not embed rowBase", reflect.TypeFor[R]()))
	}
	return &c
}

// row decodes a scanned row: the row type's own columns, then the
// record every row has.
func (c *crud[T, R]) row(r *R) (*T, error) {
	x, err := c.decode(r)
	if err != nil {
		return nil, err
	}
	b := any(r).(baseRow).columns()
	rec := c.fields(x)
	*rec.id, *rec.uuid, *rec.version = b.ID, b.UUID, b.Version
	*rec.created = timeFrom(sql.NullInt64{Int64: b.CreatedAt, Valid: true})
	*rec.updated = timeFrom(sql.NullInt64{Int64: b.UpdatedAt, Valid: true})
	if rec.node != nil {
		*rec.node = b.NodeUUID.String
	}
	return x, nil
}

// fields returns the record of x.
func (c *crud[T, R]) fields(x *T) record { return c.rec.of(x) }

// childRows are rows of another table that reference a resource row and
// keep it from being deleted.
type childRows struct {
	// table and column hold the reference; byID says it holds the
	// referenced row's id (its uuid otherwise).
	table, column string
	byID          bool
	// refused is the error of a delete the references refuse.
	refused func(uuid string) error
}

// uniqueField is one unique constraint: cond (with ? placeholders)
// selects the rows holding the values a write used; a nil first
// argument means the value was not set and cannot collide.
type uniqueField struct {
	field string
	cond  string
	args  []any
	value string
}

// uniqueColumn is the unique constraint of one column.
func uniqueColumn(field, column string, v any) uniqueField {
	return uniqueField{field: field, cond: column + " = ?", args: []any{v}, value: fmt.Sprint(v)}
}

// filters collects the conditions of a listing.
type filters struct {
	conds []string
	args  []any
}

// add appends a condition and its argument.
func (f *filters) add(cond string, v any) {
	f.conds = append(f.conds, cond)
	f.args = append(f.args, v)
}

// ofNode starts the filters of a listing of a node's children: the
// node's UUID (any case) when one is given, none otherwise.
func ofNode(nodeUUID string) filters {
	var w filters
	if nodeUUID != "" {
		w.add("n.uuid = ?", strings.ToLower(nodeUUID))
	}
	return w
}

// nilValue is the error of a write given no object.
func (c *crud[T, R]) nilValue() error {
	return &baremetal.InvalidFieldError{Kind: c.kind, Field: c.kind, Expected: "a non-nil " + c.noun}
}

// nodeID resolves the node a row names inside tx (nil for none) and
// lower-cases its UUID.
func (c *crud[T, R]) nodeID(ctx context.Context, s *Store, tx *sqlx.Tx, r record) (any, error) {
	if c.node == noNode || (c.node == nodeOptional && *r.node == "") {
		return nil, nil
	}
	id, err := s.nodeIDOf(ctx, tx, c.kind, *r.uuid, *r.node)
	if err != nil {
		return nil, err
	}
	*r.node = strings.ToLower(*r.node)
	return id, nil
}

// explainDuplicate maps a unique violation of a write of w.
func (c *crud[T, R]) explainDuplicate(ctx context.Context, s *Store, w *T, isNew bool, cause error) error {
	if c.explain != nil {
		return c.explain(ctx, s, w, isNew, cause)
	}
	var fields []uniqueField
	if c.unique != nil {
		fields = c.unique(w)
	}
	return s.explainDuplicate(ctx, c.kind, c.table, *c.fields(w).uuid, isNew, fields, cause)
}

// create validates x and inserts it, filling its ID, UUID (when empty),
// node UUID (lower case), stamps and version 1.
func (c *crud[T, R]) create(ctx context.Context, s *Store, x *T) error {
	if x == nil {
		return c.nilValue()
	}
	w := c.clone(x)
	r := c.fields(w)
	var err error
	if *r.uuid, err = newIdentity(c.kind, *r.uuid); err != nil {
		return err
	}
	args, err := c.args(w)
	if err != nil {
		return err
	}
	cols := []string{"uuid"}
	if c.node != noNode {
		cols = append(cols, "node_id")
	}
	cols = append(append(cols, c.cols...), "created_at", "updated_at", "version")
	query := "INSERT INTO " + c.table + " (" + strings.Join(cols, ", ") + ") VALUES (" +
		strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", ") + ") RETURNING id"
	now := s.now()
	err = s.inTx(ctx, func(tx *sqlx.Tx) error {
		bind := []any{*r.uuid}
		if c.node != noNode {
			nodeID, err := c.nodeID(ctx, s, tx, r)
			if err != nil {
				return err
			}
			bind = append(bind, nodeID)
		}
		bind = append(append(bind, args...), micros(now), micros(now), int64(1))
		return tx.QueryRowxContext(ctx, s.d.q(query), bind...).Scan(r.id)
	})
	if err = s.finish(ctx, err, "creating "+c.noun+" "+*r.uuid, func() error { return c.explainDuplicate(ctx, s, w, true, err) }); err != nil {
		return err
	}
	*r.created, *r.updated, *r.version = now, now, 1
	*x = *w
	return nil
}

// get returns the row whose UUID (or, with byName, name) is ident.
func (c *crud[T, R]) get(ctx context.Context, s *Store, ident string) (*T, error) {
	if !c.byName && !isUUID(ident) {
		return nil, &baremetal.NotFoundError{Kind: c.kind, Ident: ident}
	}
	cond, arg := identWhere(c.alias, ident)
	var row R
	err := s.r.GetContext(ctx, &row, s.d.q(c.selectSQL+" WHERE "+cond), arg)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, &baremetal.NotFoundError{Kind: c.kind, Ident: ident}
	}
	if err != nil {
		return nil, fmt.Errorf("sqlstore: reading %s %s: %w", c.noun, ident, err)
	}
	return c.row(&row)
}

// list returns the rows matching f, paged and ordered by page.
func (c *crud[T, R]) list(ctx context.Context, s *Store, f filters, page baremetal.Page) ([]*T, error) {
	tail, args, err := c.pageClause(ctx, s, page, f)
	if err != nil {
		return nil, err
	}
	var rows []R
	if err := s.r.SelectContext(ctx, &rows, s.d.q(c.selectSQL+tail), args...); err != nil {
		return nil, fmt.Errorf("sqlstore: listing %s: %w", c.plural, err)
	}
	out := make([]*T, 0, len(rows))
	for i := range rows {
		x, err := c.row(&rows[i])
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, nil
}

// sortExpr is the SQL expression a listing sorted by key orders by, with
// column prefix p ("" is the ID). NULLs sort as the smallest value.
func (c *crud[T, R]) sortExpr(s *Store, key, p string) (string, error) {
	if c.sortCols == nil || key == "" || key == "id" {
		return p + "id", nil
	}
	kind, ok := c.sortCols[key]
	if !ok {
		keys := make([]string, 0, len(c.sortCols)+1)
		keys = append(keys, "id")
		for k := range c.sortCols {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		return "", &baremetal.InvalidFieldError{Kind: "page", Field: "sort_key", Ident: key,
			Expected: "a sortable " + c.noun + " field: " + strings.Join(keys, ", ")}
	}
	if kind == 'i' {
		return "COALESCE(" + p + key + ", 0)", nil
	}
	return "COALESCE(" + p + key + ", '')" + s.d.collate, nil
}

// pageClause returns a listing's WHERE (f and the marker), ORDER BY and
// LIMIT, and their arguments. The order is the sort column, then the ID,
// both in the page's direction, so paging by marker never skips or
// repeats a row.
func (c *crud[T, R]) pageClause(ctx context.Context, s *Store, page baremetal.Page, f filters) (string, []any, error) {
	if page.Limit < 0 {
		return "", nil, &baremetal.InvalidFieldError{Kind: "page", Field: "limit", Expected: "zero (no limit) or a positive number"}
	}
	expr, err := c.sortExpr(s, page.SortKey, c.alias)
	if err != nil {
		return "", nil, err
	}
	desc := c.sortCols != nil && page.SortDesc
	op, dir := " > ", ""
	if desc {
		op, dir = " < ", " DESC"
	}
	conds, args := slices.Clone(f.conds), slices.Clone(f.args)
	if page.Marker != "" {
		bare, _ := c.sortExpr(s, page.SortKey, "")
		var id int64
		var val any
		err := s.r.QueryRowxContext(ctx, s.d.q("SELECT id, "+bare+" FROM "+c.table+" WHERE uuid = ?"), strings.ToLower(page.Marker)).Scan(&id, &val)
		if errors.Is(err, sql.ErrNoRows) {
			return "", nil, &baremetal.InvalidFieldError{Kind: "page", Field: "marker", Expected: "the UUID of an existing " + c.noun}
		}
		if err != nil {
			return "", nil, fmt.Errorf("sqlstore: resolving marker: %w", err)
		}
		if expr == c.alias+"id" {
			conds, args = append(conds, c.alias+"id"+op+"?"), append(args, id)
		} else {
			conds = append(conds, "("+expr+op+"? OR ("+expr+" = ? AND "+c.alias+"id"+op+"?))")
			args = append(args, val, val, id)
		}
	}
	q := ""
	if len(conds) > 0 {
		q = " WHERE " + strings.Join(conds, " AND ")
	}
	if expr == c.alias+"id" {
		q += " ORDER BY " + expr + dir
	} else {
		q += " ORDER BY " + expr + dir + ", " + c.alias + "id" + dir
	}
	if page.Limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", page.Limit)
	}
	return q, args, nil
}

// update writes x as a compare-and-swap on its version, then refreshes
// its version, updated stamp and node UUID (lower case).
func (c *crud[T, R]) update(ctx context.Context, s *Store, x *T) error {
	if x == nil {
		return c.nilValue()
	}
	w := c.clone(x)
	r := c.fields(w)
	*r.uuid = strings.ToLower(*r.uuid)
	args, err := c.args(w)
	if err != nil {
		return err
	}
	var set []string
	if c.node != noNode {
		set = append(set, "node_id = ?")
	}
	for _, col := range c.cols {
		set = append(set, col+" = ?")
	}
	set = append(set, "updated_at = ?")
	now := s.now()
	err = s.inTx(ctx, func(tx *sqlx.Tx) error {
		var bind []any
		var nodeID any
		if c.node != noNode {
			var err error
			if nodeID, err = c.nodeID(ctx, s, tx, r); err != nil {
				return err
			}
			bind = append(bind, nodeID)
		}
		if c.beforeUpdate != nil {
			if err := c.beforeUpdate(ctx, s, tx, w, nodeID); err != nil {
				return err
			}
		}
		bind = append(append(bind, args...), micros(now))
		var err error
		*r.version, err = s.casUpdate(ctx, tx, c.kind, c.table, *r.uuid, *r.version, strings.Join(set, ", "), bind)
		return err
	})
	if err = s.finish(ctx, err, "updating "+c.noun+" "+*r.uuid, func() error { return c.explainDuplicate(ctx, s, w, false, err) }); err != nil {
		return err
	}
	*r.updated = now
	*x = *w
	return nil
}

// remove deletes the row uid, refusing it while children reference it.
func (c *crud[T, R]) remove(ctx context.Context, s *Store, uid string) error {
	if c.children == nil {
		return s.deleteByUUID(ctx, c.kind, c.table, uid)
	}
	uid = strings.ToLower(uid)
	ch := c.children
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		var id int64
		err := tx.QueryRowxContext(ctx, s.d.q("SELECT id FROM "+c.table+" WHERE uuid = ?"), uid).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return &baremetal.NotFoundError{Kind: c.kind, Ident: uid}
		}
		if err != nil {
			return err
		}
		var ref any = uid
		if ch.byID {
			ref = id
		}
		var one int
		err = tx.QueryRowxContext(ctx, s.d.q("SELECT 1 FROM "+ch.table+" WHERE "+ch.column+" = ? LIMIT 1"), ref).Scan(&one)
		if err == nil {
			return ch.refused(uid)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		_, err = tx.ExecContext(ctx, s.d.q("DELETE FROM "+c.table+" WHERE id = ?"), id)
		return err
	})
	// The foreign key refuses the delete when a reference was added
	// meanwhile.
	if err != nil && !typed(err) && classify(err) == foreignKeyViolation {
		return ch.refused(uid)
	}
	return s.finish(ctx, err, "deleting "+c.noun+" "+uid, nil)
}

// collection is a resource table bound to a store: the
// baremetal.Collection a Store accessor returns. where turns a listing's
// filter into conditions.
type collection[T, R, F any] struct {
	s     *Store
	c     *crud[T, R]
	where func(F) (filters, error)
}

// bind binds the table c to s, with where for its listings' filter.
func bind[T, R, F any](s *Store, c *crud[T, R], where func(F) (filters, error)) baremetal.Collection[T, F] {
	return collection[T, R, F]{s: s, c: c, where: where}
}

// noFilter is the where of a resource whose filter has no fields.
func noFilter[F any](F) (filters, error) { return filters{}, nil }

// Create implements baremetal.Collection.
func (b collection[T, R, F]) Create(ctx context.Context, x *T) error { return b.c.create(ctx, b.s, x) }

// Get implements baremetal.Collection.
func (b collection[T, R, F]) Get(ctx context.Context, ident string) (*T, error) {
	return b.c.get(ctx, b.s, ident)
}

// List implements baremetal.Collection.
func (b collection[T, R, F]) List(ctx context.Context, f F, page baremetal.Page) ([]*T, error) {
	w, err := b.where(f)
	if err != nil {
		return nil, err
	}
	return b.c.list(ctx, b.s, w, page)
}

// Update implements baremetal.Collection.
func (b collection[T, R, F]) Update(ctx context.Context, x *T) error { return b.c.update(ctx, b.s, x) }

// Delete implements baremetal.Collection.
func (b collection[T, R, F]) Delete(ctx context.Context, uuid string) error {
	return b.c.remove(ctx, b.s, uuid)
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
		if len(f.args) == 0 || f.args[0] == nil {
			continue
		}
		var one int
		if s.w.QueryRowxContext(ctx, s.d.q("SELECT 1 FROM "+table+" WHERE "+f.cond+" AND uuid <> ?"), append(slices.Clone(f.args), uid)...).Scan(&one) == nil {
			return &baremetal.DuplicateError{Kind: kind, Field: f.field, Value: f.value}
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
