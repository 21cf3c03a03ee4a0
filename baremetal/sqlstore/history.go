package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/anvilmetal/anvil/baremetal"
)

// AddHistory implements baremetal.HistoryStore. On SQLite the insert
// joins the group commit of concurrent writes.
func (s *Store) AddHistory(ctx context.Context, e *baremetal.HistoryEntry) error {
	h, err := s.prepHistory(e)
	if err != nil {
		return err
	}
	args := append(h.args, strings.ToLower(e.NodeUUID))
	err = s.write(ctx, func(w writeTx) error {
		return w.stmt(s.st.addHistory).QueryRowxContext(w.ctx, args...).Scan(&e.ID)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return &baremetal.NotFoundError{Kind: "node", Ident: e.NodeUUID}
	}
	if err != nil {
		return fmt.Errorf("sqlstore: adding history to node %s: %w", e.NodeUUID, err)
	}
	e.Event, e.Message = h.event, h.message
	return nil
}

// historyRow is a validated, masked history entry ready to insert.
type historyRow struct {
	event, message string
	// args are the insert's values, node reference excluded.
	args []any
}

// prepHistory validates and masks e, stamps its CreatedAt when empty, and
// returns the insert's values.
func (s *Store) prepHistory(e *baremetal.HistoryEntry) (historyRow, error) {
	if e == nil {
		return historyRow{}, &baremetal.InvalidFieldError{Kind: "history", Field: "entry", Expected: "a non-nil entry"}
	}
	bad := func(field, expected string) error {
		return &baremetal.InvalidFieldError{Kind: "history", Ident: e.NodeUUID, Field: field, Expected: expected}
	}
	if e.Event == "" {
		return historyRow{}, bad("event", "a short description of what happened")
	}
	switch e.Severity {
	case "":
		e.Severity = baremetal.HistoryInfo
	case baremetal.HistoryInfo, baremetal.HistoryWarning, baremetal.HistoryError:
	default:
		return historyRow{}, bad("severity", "INFO, WARNING or ERROR")
	}
	event := baremetal.MaskText(e.Event)
	message := baremetal.MaskText(e.Message)
	holder := &baremetal.Node{UUID: e.NodeUUID}
	for _, f := range [...]struct {
		name, v string
		max     int
	}{{"event", event, 255}, {"event_type", e.EventType, 255}, {"message", message, 0}, {"conductor", e.Conductor, 255}, {"user", e.User, 255}} {
		if err := checkText(holder, f.name, f.v, f.max); err != nil {
			var ife *baremetal.InvalidFieldError
			if errors.As(err, &ife) {
				return historyRow{}, bad(f.name, ife.Expected)
			}
			return historyRow{}, err
		}
	}
	if e.CreatedAt.IsZero() {
		e.CreatedAt = s.now()
	}
	args := make([]any, 0, 8)
	args = append(args, event, nullIfEmpty(e.EventType), e.Severity, nullIfEmpty(message), nullIfEmpty(e.Conductor), nullIfEmpty(e.User),
		micros(e.CreatedAt))
	return historyRow{event: event, message: message, args: args}, nil
}

// ListHistory implements baremetal.HistoryStore.
func (s *Store) ListHistory(ctx context.Context, nodeUUID string, limit int) ([]*baremetal.HistoryEntry, error) {
	q := "SELECT h.id, n.uuid AS node_uuid, h.event, COALESCE(h.event_type, '') AS event_type, h.severity, COALESCE(h.message, '') AS message, " +
		"COALESCE(h.conductor, '') AS conductor, COALESCE(h.user_name, '') AS user_name, h.created_at " +
		"FROM node_history h JOIN nodes n ON n.id = h.node_id WHERE n.uuid = ? ORDER BY h.id DESC"
	if limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", limit)
	}
	var rows []struct {
		ID        int64  `db:"id"`
		NodeUUID  string `db:"node_uuid"`
		Event     string `db:"event"`
		EventType string `db:"event_type"`
		Severity  string `db:"severity"`
		Message   string `db:"message"`
		Conductor string `db:"conductor"`
		User      string `db:"user_name"`
		CreatedAt int64  `db:"created_at"`
	}
	if err := s.r.SelectContext(ctx, &rows, s.d.q(q), strings.ToLower(nodeUUID)); err != nil {
		return nil, fmt.Errorf("sqlstore: listing history of node %s: %w", nodeUUID, err)
	}
	if len(rows) == 0 {
		var one int
		err := s.r.QueryRowxContext(ctx, s.d.q("SELECT 1 FROM nodes WHERE uuid = ?"), strings.ToLower(nodeUUID)).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, &baremetal.NotFoundError{Kind: "node", Ident: nodeUUID}
		}
	}
	out := make([]*baremetal.HistoryEntry, len(rows))
	for i, r := range rows {
		out[i] = &baremetal.HistoryEntry{ID: r.ID, NodeUUID: r.NodeUUID, Event: r.Event, EventType: r.EventType, Severity: r.Severity,
			Message: r.Message, Conductor: r.Conductor, User: r.User, CreatedAt: timeFrom(sql.NullInt64{Int64: r.CreatedAt, Valid: true})}
	}
	slices.Reverse(out)
	return out, nil
}
