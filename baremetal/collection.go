package baremetal

import "context"

// Collection keeps one kind of resource beside nodes and ports
// (portgroups, allocations, deploy templates, runbooks, chassis, volume
// connectors and targets), all created, read, listed, updated and deleted
// the same way. T is the model, F the filter of its listings. A Store
// hands out one per resource (see ResourceStore), so a component that
// keeps one resource can ask for its Collection alone, and a test can
// give it any implementation.
//
// Every write either succeeds completely or changes neither the store
// nor the caller's value, and updates are compare-and-swap on the
// model's Version. What a resource adds to this contract (the fields
// that are unique, lookups by name, rows that keep a row from being
// deleted, sort keys) is written on the ResourceStore method that
// returns its Collection.
type Collection[T, F any] interface {
	// Create validates x and inserts it, filling its ID, UUID (generated
	// when empty; lower case), CreatedAt, UpdatedAt and Version (1); a
	// node UUID it names is stored lower case. Errors:
	// *InvalidFieldError, *DuplicateError, and a *NotFoundError for a
	// node UUID naming no node.
	Create(ctx context.Context, x *T) error
	// Get returns the row whose UUID (or, for the resources that have
	// names, name) is ident, or a *NotFoundError.
	Get(ctx context.Context, ident string) (*T, error)
	// List returns the rows matching f (set fields combined with AND) in
	// ID order, or sorted by page.SortKey where the resource has sort
	// keys, at most page.Limit of them, starting after the row whose UUID
	// is page.Marker. Errors: *InvalidFieldError (a negative limit, a
	// marker naming no row, an unknown sort key, a malformed filter).
	List(ctx context.Context, f F, page Page) ([]*T, error)
	// Update writes x's fields (its node UUID included) as a
	// compare-and-swap on x.Version; on success it increments x.Version
	// and refreshes x.UpdatedAt. Errors: *ConflictError (the version
	// moved on: read again), *NotFoundError, *InvalidFieldError,
	// *DuplicateError.
	Update(ctx context.Context, x *T) error
	// Delete deletes the row whose UUID is uuid, or returns a
	// *NotFoundError.
	Delete(ctx context.Context, uuid string) error
}
