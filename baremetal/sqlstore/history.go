package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/statemachine"
)

// AddHistory implements baremetal.HistoryStore. On SQLite the insert
// joins the group commit of concurrent writes. The entry's state, target
// and duration left empty are filled from the node's row in the insert
// itself, so they are the node's as the entry is written.
func (s *Store) AddHistory(ctx context.Context, e *baremetal.HistoryEntry) error {
	h, err := s.prepHistory(e)
	if err != nil {
		return err
	}
	args := append(h.args, nullIfEmpty(string(e.State)), nullIfEmpty(string(e.TargetState)), durationArg(e.Duration), micros(e.CreatedAt),
		strings.ToLower(e.NodeUUID))
	var (
		id       int64
		st, tgt  string
		duration sql.NullInt64
	)
	err = s.write(ctx, func(w writeTx) error {
		return w.stmt(s.st.addHistory).QueryRowxContext(w.ctx, args...).Scan(&id, &st, &tgt, &duration)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return &baremetal.NotFoundError{Kind: "node", Ident: e.NodeUUID}
	}
	if err != nil {
		return fmt.Errorf("sqlstore: adding history to node %s: %w", e.NodeUUID, err)
	}
	e.ID, e.Event, e.Message = id, h.event, h.message
	e.State, e.TargetState, e.Duration = statemachine.State(st), statemachine.State(tgt), durationFrom(duration)
	return nil
}

// historyRow is a validated, masked history entry ready to insert.
type historyRow struct {
	event, message string
	// args are the insert's first values: event, event type, severity,
	// message, conductor, user and creation time.
	args []any
}

// prepHistory validates and masks e, stamps its CreatedAt when empty, and
// returns the insert's first values.
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
	if e.Duration != nil && *e.Duration < 0 {
		return historyRow{}, bad("duration", "a duration of zero or more")
	}
	event := baremetal.MaskText(e.Event)
	message := baremetal.MaskText(e.Message)
	holder := &baremetal.Node{UUID: e.NodeUUID}
	for _, f := range [...]struct {
		name, v string
		max     int
	}{{"event", event, 255}, {"event_type", e.EventType, 255}, {"message", message, 0}, {"conductor", e.Conductor, 255}, {"user", e.User, 255},
		{"state", string(e.State), 255}, {"target_provision_state", string(e.TargetState), 255}} {
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
	args := make([]any, 0, 12)
	args = append(args, event, nullIfEmpty(e.EventType), e.Severity, nullIfEmpty(message), nullIfEmpty(e.Conductor), nullIfEmpty(e.User),
		micros(e.CreatedAt))
	return historyRow{event: event, message: message, args: args}, nil
}

// fillFromNode sets e's state, target and duration left empty from n as
// the write of n (not yet done) leaves it: its new states, and the time
// since its provision state was last stamped before the write.
func fillFromNode(e *baremetal.HistoryEntry, n *baremetal.Node) {
	if e.State == "" {
		e.State = n.ProvisionState
	}
	if e.TargetState == "" {
		e.TargetState = n.TargetProvisionState
	}
	if e.Duration == nil && !n.ProvisionUpdatedAt.IsZero() {
		d := max(e.CreatedAt.Sub(n.ProvisionUpdatedAt), 0)
		// The store keeps microseconds.
		d = d.Truncate(time.Microsecond)
		e.Duration = &d
	}
}

// durationArg is d as stored: microseconds, or NULL.
func durationArg(d *time.Duration) any {
	if d == nil {
		return nil
	}
	return d.Microseconds()
}

// durationFrom decodes a nullable microsecond column.
func durationFrom(v sql.NullInt64) *time.Duration {
	if !v.Valid {
		return nil
	}
	d := time.Duration(v.Int64) * time.Microsecond
	return &d
}

// historySelect reads entries as historyRecord scans them.
const historySelect = "SELECT h.id, n.uuid AS node_uuid, h.event, COALESCE(h.event_type, '') AS event_type, h.severity, " +
	"COALESCE(h.message, '') AS message, COALESCE(h.conductor, '') AS conductor, COALESCE(h.user_name, '') AS user_name, h.created_at, " +
	"COALESCE(h.state, '') AS state, COALESCE(h.target_provision_state, '') AS target_provision_state, h.duration_us " +
	"FROM node_history h JOIN nodes n ON n.id = h.node_id "

// historyRecord is one row of historySelect.
type historyRecord struct {
	ID         int64         `db:"id"`
	NodeUUID   string        `db:"node_uuid"`
	Event      string        `db:"event"`
	EventType  string        `db:"event_type"`
	Severity   string        `db:"severity"`
	Message    string        `db:"message"`
	Conductor  string        `db:"conductor"`
	User       string        `db:"user_name"`
	CreatedAt  int64         `db:"created_at"`
	State      string        `db:"state"`
	Target     string        `db:"target_provision_state"`
	DurationUS sql.NullInt64 `db:"duration_us"`
}

func (r *historyRecord) entry() *baremetal.HistoryEntry {
	return &baremetal.HistoryEntry{ID: r.ID, NodeUUID: r.NodeUUID, Event: r.Event, EventType: r.EventType, Severity: r.Severity,
		Message: r.Message, Conductor: r.Conductor, User: r.User, CreatedAt: timeFrom(sql.NullInt64{Int64: r.CreatedAt, Valid: true}),
		State: statemachine.State(r.State), TargetState: statemachine.State(r.Target), Duration: durationFrom(r.DurationUS)}
}

// ListHistory implements baremetal.HistoryStore.
func (s *Store) ListHistory(ctx context.Context, nodeUUID string, limit int) ([]*baremetal.HistoryEntry, error) {
	out, err := s.PageHistory(ctx, nodeUUID, baremetal.HistoryPage{Limit: limit, Descending: true, ByID: true})
	if err != nil {
		return nil, err
	}
	slices.Reverse(out)
	return out, nil
}

// PageHistory implements baremetal.HistoryStore. The page is one indexed
// range read: keyset pagination on (created_at, id), or on id.
func (s *Store) PageHistory(ctx context.Context, nodeUUID string, p baremetal.HistoryPage) ([]*baremetal.HistoryEntry, error) {
	uuid := strings.ToLower(nodeUUID)
	var b strings.Builder
	b.WriteString(historySelect)
	b.WriteString("WHERE h.node_id = (SELECT id FROM nodes WHERE uuid = ?)")
	args := []any{uuid}
	cmp, dir := ">", "ASC"
	if p.Descending {
		cmp, dir = "<", "DESC"
	}
	if p.After != 0 {
		var at int64
		err := s.r.QueryRowxContext(ctx, s.d.q("SELECT h.created_at FROM node_history h JOIN nodes n ON n.id = h.node_id WHERE n.uuid = ? AND h.id = ?"),
			uuid, p.After).Scan(&at)
		if errors.Is(err, sql.ErrNoRows) {
			if err := s.historyNodeExists(ctx, nodeUUID); err != nil {
				return nil, err
			}
			return nil, &baremetal.NotFoundError{Kind: "history", Ident: fmt.Sprint(p.After)}
		}
		if err != nil {
			return nil, fmt.Errorf("sqlstore: history of node %s: %w", nodeUUID, err)
		}
		if p.ByID {
			fmt.Fprintf(&b, " AND h.id %s ?", cmp)
			args = append(args, p.After)
		} else {
			fmt.Fprintf(&b, " AND (h.created_at %s ? OR (h.created_at = ? AND h.id %s ?))", cmp, cmp)
			args = append(args, at, at, p.After)
		}
	}
	if p.ByID {
		fmt.Fprintf(&b, " ORDER BY h.id %s", dir)
	} else {
		fmt.Fprintf(&b, " ORDER BY h.created_at %s, h.id %s", dir, dir)
	}
	if p.Limit > 0 {
		b.WriteString(" LIMIT ?")
		args = append(args, p.Limit)
	}
	var rows []historyRecord
	if err := s.r.SelectContext(ctx, &rows, s.d.q(b.String()), args...); err != nil {
		return nil, fmt.Errorf("sqlstore: listing history of node %s: %w", nodeUUID, err)
	}
	if len(rows) == 0 {
		if err := s.historyNodeExists(ctx, nodeUUID); err != nil {
			return nil, err
		}
	}
	out := make([]*baremetal.HistoryEntry, len(rows))
	for i := range rows {
		out[i] = rows[i].entry()
	}
	return out, nil
}

// GetHistory implements baremetal.HistoryStore.
func (s *Store) GetHistory(ctx context.Context, nodeUUID string, id int64) (*baremetal.HistoryEntry, error) {
	var r historyRecord
	err := s.r.GetContext(ctx, &r, s.d.q(historySelect+"WHERE n.uuid = ? AND h.id = ?"), strings.ToLower(nodeUUID), id)
	if errors.Is(err, sql.ErrNoRows) {
		if err := s.historyNodeExists(ctx, nodeUUID); err != nil {
			return nil, err
		}
		return nil, &baremetal.NotFoundError{Kind: "history", Ident: fmt.Sprint(id)}
	}
	if err != nil {
		return nil, fmt.Errorf("sqlstore: history entry %d of node %s: %w", id, nodeUUID, err)
	}
	return r.entry(), nil
}

// historyNodeExists returns a *baremetal.NotFoundError when the node is
// not in the store.
func (s *Store) historyNodeExists(ctx context.Context, nodeUUID string) error {
	var one int
	err := s.r.QueryRowxContext(ctx, s.d.q("SELECT 1 FROM nodes WHERE uuid = ?"), strings.ToLower(nodeUUID)).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return &baremetal.NotFoundError{Kind: "node", Ident: nodeUUID}
	}
	if err != nil {
		return fmt.Errorf("sqlstore: history of node %s: %w", nodeUUID, err)
	}
	return nil
}
