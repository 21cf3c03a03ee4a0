package sqlstore

import (
	"strings"
	"testing"
	"time"
)

// A resource description whose model lacks a record field, or whose row
// type does not embed rowBase, is a programming error caught when the
// package loads, with a message naming the type and the field.
func TestCrudDescriptionMistakesPanic(t *testing.T) {
	type model struct {
		ID                   int64
		UUID                 string
		CreatedAt, UpdatedAt time.Time
		Version              int64
	}
	type noVersion struct {
		ID                   int64
		UUID                 string
		CreatedAt, UpdatedAt time.Time
	}
	type goodRow struct{ rowBase }
	type badRow struct{ ID int64 }
	for _, tc := range []struct {
		name, want string
		build      func()
	}{
		{"missing field", "has no field Version", func() { indexRecord[noVersion](false) }},
		{"missing node field", "has no field NodeUUID", func() { indexRecord[model](true) }},
		{"row without rowBase", "does not embed rowBase", func() { newCrud(crud[model, badRow]{}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				r := recover()
				if msg, _ := r.(string); !strings.Contains(msg, tc.want) {
					t.Fatalf("panic %v, want one naming %q", r, tc.want)
				}
			}()
			tc.build()
		})
	}
	c := newCrud(crud[model, goodRow]{decode: func(*goodRow) (*model, error) { return &model{}, nil }})
	row := &goodRow{rowBase{ID: 7, UUID: "u", CreatedAt: 1, UpdatedAt: 2, Version: 3}}
	m, err := c.row(row)
	if err != nil || m.ID != 7 || m.UUID != "u" || m.Version != 3 || m.CreatedAt.UnixMicro() != 1 || m.UpdatedAt.UnixMicro() != 2 {
		t.Fatalf("row = %+v, %v; want the record copied from rowBase", m, err)
	}
}
