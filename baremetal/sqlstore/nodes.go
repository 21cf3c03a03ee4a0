package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/anvilmetal/anvil/statemachine"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/google/uuid"
	"github.com/jmoiron/sqlx"
)

// defaultProvisionState is where a node created without a state starts.
const defaultProvisionState = "enroll"

// insertBatch is how many nodes one multi-row INSERT carries; with about
// 65 columns it stays under both databases' bind-parameter limits.
const insertBatch = 200

// validName reports whether s is a valid node or port name, by the rules
// of baremetal.ValidNodeName (Ironic's, and not "." or "..").
func validName(s string) bool { return baremetal.ValidNodeName(s) }

// nameExpected is what an invalid name is refused with.
const nameExpected = "1 to 255 of letters, digits, '-', '.', '_' or '~', not \".\" or \"..\", and not UUID-like"

// unstoredLabel makes an *InvalidFieldError about a node created without
// a UUID name it by what the caller gave (its name) or say it is unnamed
// and not stored, instead of naming the UUID prepareNewNode generated for
// a node that never reached the database.
func unstoredLabel(err error, orig *baremetal.Node) error {
	var ife *baremetal.InvalidFieldError
	if orig.UUID != "" || !errors.As(err, &ife) {
		return err
	}
	c := *ife
	c.Ident = orig.Name
	if c.Ident == "" {
		c.Ident = "(unnamed, not stored)"
	}
	return &c
}

// prepareNewNode fills the store-assigned fields of a node about to be
// created and checks what the column table does not.
func (s *Store) prepareNewNode(n *baremetal.Node) error {
	if n == nil {
		return &baremetal.InvalidFieldError{Kind: "node", Field: "node", Expected: "a non-nil node"}
	}
	if n.UUID == "" {
		n.UUID = uuid.NewString()
	} else if !isUUID(n.UUID) {
		return invalid(n, "uuid", "a UUID such as 1be26c0b-03f2-4d2e-ae87-c02d7f33c123", nil)
	} else {
		n.UUID = strings.ToLower(n.UUID)
	}
	if n.Name != "" && !validName(n.Name) {
		return invalid(n, "name", nameExpected, nil)
	}
	if n.InstanceUUID != "" && !isUUID(n.InstanceUUID) {
		return invalid(n, "instance_uuid", "a UUID", nil)
	}
	if n.ParentNode != "" && !isUUID(n.ParentNode) {
		return invalid(n, "parent_node", "a node UUID", nil)
	}
	if n.Reservation != "" {
		return invalid(n, "reservation", "empty: a node is created unlocked; use ReserveNode", nil)
	}
	if n.ProvisionState == "" {
		n.ProvisionState = defaultProvisionState
	}
	n.ChassisUUID = strings.ToLower(n.ChassisUUID)
	return nil
}

// checkUpdate checks the fields of an update that the column table does
// not.
func checkUpdate(n *baremetal.Node) error {
	if n == nil {
		return &baremetal.InvalidFieldError{Kind: "node", Field: "node", Expected: "a non-nil node"}
	}
	if n.Name != "" && !validName(n.Name) {
		return invalid(n, "name", nameExpected, nil)
	}
	if n.InstanceUUID != "" && !isUUID(n.InstanceUUID) {
		return invalid(n, "instance_uuid", "a UUID", nil)
	}
	if n.ParentNode != "" && !isUUID(n.ParentNode) {
		return invalid(n, "parent_node", "a node UUID", nil)
	}
	if n.ProvisionState == "" {
		return invalid(n, "provision_state", "a provision state", nil)
	}
	return nil
}

// CreateNode implements baremetal.NodeStore.
func (s *Store) CreateNode(ctx context.Context, n *baremetal.Node) error {
	return s.CreateNodes(ctx, []*baremetal.Node{n})
}

// CreateNodes implements baremetal.NodeStore. All nodes are validated
// first, then inserted in one transaction with multi-row inserts.
func (s *Store) CreateNodes(ctx context.Context, nodes []*baremetal.Node) error {
	if len(nodes) == 0 {
		return nil
	}
	// Work on copies so a failed call leaves the caller's nodes as given.
	work := make([]*baremetal.Node, len(nodes))
	args := make([][]any, len(nodes))
	seen := map[string]string{}
	now := s.now()
	for i, orig := range nodes {
		if orig == nil {
			return &baremetal.InvalidFieldError{Kind: "node", Field: "node", Expected: fmt.Sprintf("a non-nil node at index %d", i)}
		}
		n := *orig
		if err := s.prepareNewNode(&n); err != nil {
			return unstoredLabel(err, orig)
		}
		for _, u := range [][2]string{{"uuid", n.UUID}, {"name", n.Name}, {"instance_uuid", n.InstanceUUID}} {
			if u[1] == "" {
				continue
			}
			key := u[0] + "\x00" + u[1]
			if _, dup := seen[key]; dup {
				return &baremetal.DuplicateError{Kind: "node", Field: u[0], Value: u[1]}
			}
			seen[key] = n.UUID
		}
		n.CreatedAt, n.UpdatedAt, n.ProvisionUpdatedAt, n.Version = now, now, now, 1
		a, err := nodeArgs(&n)
		if err != nil {
			return unstoredLabel(err, orig)
		}
		work[i], args[i] = &n, a
	}

	ids := make(map[string]int64, len(nodes))
	err := s.inTx(ctx, func(tx *sqlx.Tx) error {
		for start := 0; start < len(work); start += insertBatch {
			end := min(start+insertBatch, len(work))
			bind := make([]any, 0, (end-start)*(len(nodeCols)+5))
			for i := start; i < end; i++ {
				n := work[i]
				bind = append(bind, n.UUID, micros(n.ProvisionUpdatedAt), micros(now), micros(now), int64(1))
				bind = append(bind, args[i]...)
			}
			var rows *sql.Rows
			var err error
			switch end - start {
			case insertBatch:
				// Full batches reuse one prepared statement: parsing a
				// 13,000-parameter INSERT costs more than running it.
				rows, err = tx.StmtxContext(ctx, s.st.insertFull).QueryContext(ctx, bind...)
			case 1:
				// So does CreateNode, enrolling nodes one by one.
				rows, err = tx.StmtxContext(ctx, s.st.insertOne).QueryContext(ctx, bind...)
			default:
				rows, err = tx.QueryContext(ctx, s.d.q(insertNodesSQL(end-start)), bind...)
			}
			if err != nil {
				return err
			}
			for rows.Next() {
				var id int64
				var u string
				if err := rows.Scan(&id, &u); err != nil {
					_ = rows.Close()
					return err
				}
				ids[u] = id
			}
			if err := rows.Close(); err != nil {
				return err
			}
			if err := rows.Err(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		switch classify(err) {
		case uniqueViolation:
			return s.explainNodeDuplicate(ctx, work, err)
		case foreignKeyViolation:
			return s.explainNodeChassis(ctx, work, err)
		}
		return fmt.Errorf("sqlstore: creating %d node(s): %w", len(nodes), err)
	}
	for i, n := range work {
		n.ID = ids[n.UUID]
		*nodes[i] = *n
	}
	if s.hasSubscribers() {
		changes := make([]baremetal.NodeChange, len(work))
		for i, n := range work {
			changes[i] = baremetal.NodeChange{UUID: n.UUID, Op: "create", ProvisionState: n.ProvisionState,
				TargetProvisionState: n.TargetProvisionState, Version: n.Version}
		}
		s.notify(changes...)
	}
	return nil
}

// insertNodesSQL is the multi-row INSERT of rows nodes, returning their
// IDs and UUIDs.
func insertNodesSQL(rows int) string {
	cols := []string{"uuid", "provision_updated_at", "created_at", "updated_at", "version"}
	for _, c := range nodeCols {
		cols = append(cols, c.name)
	}
	rowPH := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(cols)), ", ") + ")"
	return "INSERT INTO nodes (" + strings.Join(cols, ", ") + ") VALUES " +
		strings.TrimSuffix(strings.Repeat(rowPH+", ", rows), ", ") + " RETURNING id, uuid"
}

// explainNodeDuplicate finds which unique field of which node collided
// with a stored node, after the database refused an insert or update.
func (s *Store) explainNodeDuplicate(ctx context.Context, nodes []*baremetal.Node, cause error) error {
	probe := s.d.q("SELECT uuid, COALESCE(name, ''), COALESCE(instance_uuid, ''), COALESCE(allocation_uuid, '') FROM nodes " +
		"WHERE uuid = ? OR name = ? OR instance_uuid = ? OR allocation_uuid = ?")
	for _, n := range nodes {
		rows, err := s.w.QueryContext(ctx, probe, n.UUID, nullIfEmpty(n.Name), nullIfEmpty(n.InstanceUUID), nullIfEmpty(n.AllocationUUID))
		if err != nil {
			return fmt.Errorf("sqlstore: finding the duplicate field: %w (after %w)", err, cause)
		}
		var dup *baremetal.DuplicateError
		for rows.Next() && dup == nil {
			var u, name, inst, alloc string
			if err := rows.Scan(&u, &name, &inst, &alloc); err != nil {
				break
			}
			switch {
			case n.ID == 0 && u == n.UUID:
				dup = &baremetal.DuplicateError{Kind: "node", Field: "uuid", Value: n.UUID}
			case u != n.UUID && n.Name != "" && name == n.Name:
				dup = &baremetal.DuplicateError{Kind: "node", Field: "name", Value: n.Name}
			case u != n.UUID && n.InstanceUUID != "" && inst == n.InstanceUUID:
				dup = &baremetal.DuplicateError{Kind: "node", Field: "instance_uuid", Value: n.InstanceUUID}
			case u != n.UUID && n.AllocationUUID != "" && alloc == n.AllocationUUID:
				dup = &baremetal.DuplicateError{Kind: "node", Field: "allocation_uuid", Value: n.AllocationUUID}
			}
		}
		_ = rows.Close()
		if dup != nil {
			return dup
		}
	}
	return fmt.Errorf("sqlstore: unique constraint violated: %w", cause)
}

// explainNodeChassis finds the node whose chassis does not exist, after
// the database refused a write for a reference (a node's only one).
func (s *Store) explainNodeChassis(ctx context.Context, nodes []*baremetal.Node, cause error) error {
	for _, n := range nodes {
		if n.ChassisUUID == "" {
			continue
		}
		var one int
		err := s.w.QueryRowxContext(ctx, s.d.q("SELECT 1 FROM chassis WHERE uuid = ?"), strings.ToLower(n.ChassisUUID)).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return &baremetal.NotFoundError{Kind: "chassis", Ident: n.ChassisUUID}
		}
	}
	return fmt.Errorf("sqlstore: a node's chassis reference was refused: %w", cause)
}

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// GetNode implements baremetal.NodeStore.
func (s *Store) GetNode(ctx context.Context, ident string) (*baremetal.Node, error) {
	var row *sqlx.Row
	if isUUID(ident) {
		row = s.st.getByUUID.QueryRowxContext(ctx, strings.ToLower(ident))
	} else {
		row = s.st.getByName.QueryRowxContext(ctx, ident)
	}
	n, err := scanNode(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, &baremetal.NotFoundError{Kind: "node", Ident: ident}
	}
	if err != nil {
		return nil, fmt.Errorf("sqlstore: reading node %s: %w", ident, err)
	}
	return n, nil
}

// inList is the condition "col IN (?, ...)" and its arguments, one a
// value of vals (strings or provision states).
func inList[T ~string](col string, vals []T) (string, []any) {
	args := make([]any, len(vals))
	for i, v := range vals {
		args[i] = string(v)
	}
	return col + " IN (" + strings.TrimSuffix(strings.Repeat("?, ", len(vals)), ", ") + ")", args
}

// where builds the WHERE clause and arguments of a node filter.
func (s *Store) where(ctx context.Context, f baremetal.NodeFilter, page baremetal.Page) (string, []any, error) {
	var conds []string
	var args []any
	in := func(cond string, vals []any) {
		conds = append(conds, cond)
		args = append(args, vals...)
	}
	if len(f.ProvisionStates) > 0 {
		in(inList("provision_state", f.ProvisionStates))
	}
	if f.Maintenance != nil {
		// A literal, so the planner can use the partial index of nodes
		// in maintenance.
		if *f.Maintenance {
			conds = append(conds, "maintenance = TRUE")
		} else {
			conds = append(conds, "maintenance = FALSE")
		}
	}
	if f.Reserved != nil {
		if *f.Reserved {
			conds = append(conds, "reservation IS NOT NULL")
		} else {
			conds = append(conds, "reservation IS NULL")
		}
	}
	if f.ReservedBy != "" {
		conds = append(conds, "reservation = ?")
		args = append(args, f.ReservedBy)
	}
	if f.ConductorGroup != nil {
		conds = append(conds, "conductor_group = ?")
		args = append(args, *f.ConductorGroup)
	}
	if len(f.Drivers) > 0 {
		in(inList("driver", f.Drivers))
	}
	if !f.ProvisionUpdatedBefore.IsZero() {
		conds = append(conds, "provision_updated_at < ?")
		args = append(args, micros(f.ProvisionUpdatedBefore))
	}
	if f.Associated != nil {
		if *f.Associated {
			conds = append(conds, "instance_uuid IS NOT NULL")
		} else {
			conds = append(conds, "instance_uuid IS NULL")
		}
	}
	if f.ConductorAffinityNot != 0 {
		conds = append(conds, "(conductor_affinity IS NULL OR conductor_affinity <> ?)")
		args = append(args, f.ConductorAffinityNot)
	}
	if f.ConsoleEnabled != nil {
		if *f.ConsoleEnabled {
			conds = append(conds, "console_enabled = TRUE")
		} else {
			conds = append(conds, "console_enabled = FALSE")
		}
	}
	if f.InstanceUUID != "" {
		conds = append(conds, "instance_uuid = ?")
		args = append(args, strings.ToLower(f.InstanceUUID))
	}
	for _, eq := range []struct{ col, val string }{
		{"resource_class", f.ResourceClass}, {"fault", f.Fault}, {"owner", f.Owner}, {"lessee", f.Lessee},
	} {
		if eq.val != "" {
			conds = append(conds, eq.col+" = ?")
			args = append(args, eq.val)
		}
	}
	if len(f.Shards) > 0 {
		in(inList("shard", f.Shards))
	}
	if f.Retired != nil {
		if *f.Retired {
			conds = append(conds, "retired = TRUE")
		} else {
			conds = append(conds, "retired = FALSE")
		}
	}
	if f.DescriptionContains != "" {
		// instr/strpos: a plain substring test, with no LIKE wildcards
		// to escape.
		if s.d.name == "postgres" {
			conds = append(conds, "strpos(description, ?) > 0")
		} else {
			conds = append(conds, "instr(description, ?) > 0")
		}
		args = append(args, f.DescriptionContains)
	}
	if f.Project != "" {
		conds = append(conds, "(owner = ? OR lessee = ?)")
		args = append(args, f.Project, f.Project)
	}
	if f.Sharded != nil {
		if *f.Sharded {
			conds = append(conds, "shard IS NOT NULL")
		} else {
			conds = append(conds, "shard IS NULL")
		}
	}
	if f.InstanceName != "" {
		conds = append(conds, "instance_name = ?")
		args = append(args, f.InstanceName)
	}
	if f.ChassisUUID != "" {
		conds = append(conds, "chassis_uuid = ?")
		args = append(args, strings.ToLower(f.ChassisUUID))
	}
	if f.ParentNode != nil {
		if *f.ParentNode == "" {
			conds = append(conds, "parent_node IS NULL")
		} else {
			conds = append(conds, "parent_node = ?")
			args = append(args, *f.ParentNode)
		}
	}
	if page.Marker != "" {
		sortExpr, err := s.sortExpr(page.SortKey)
		if err != nil {
			return "", nil, err
		}
		var id int64
		var val any
		err = s.r.QueryRowxContext(ctx, s.d.q("SELECT id, "+sortExpr+" FROM nodes WHERE uuid = ?"), strings.ToLower(page.Marker)).Scan(&id, &val)
		if errors.Is(err, sql.ErrNoRows) {
			return "", nil, &baremetal.InvalidFieldError{Kind: "page", Field: "marker", Expected: "the UUID of an existing node"}
		}
		if err != nil {
			return "", nil, fmt.Errorf("sqlstore: resolving marker: %w", err)
		}
		switch {
		case page.SortKey == "" || page.SortKey == "id":
			op := ">"
			if page.SortDesc {
				op = "<"
			}
			conds = append(conds, "id "+op+" ?")
			args = append(args, id)
		default:
			op := ">"
			if page.SortDesc {
				op = "<"
			}
			conds = append(conds, "("+sortExpr+" "+op+" ? OR ("+sortExpr+" = ? AND id "+op+" ?))")
			args = append(args, val, val, id)
		}
	}
	if len(conds) == 0 {
		return "", nil, nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args, nil
}

// ListNodes implements baremetal.NodeStore.
func (s *Store) ListNodes(ctx context.Context, f baremetal.NodeFilter, page baremetal.Page) ([]*baremetal.Node, error) {
	if page.Limit < 0 {
		return nil, &baremetal.InvalidFieldError{Kind: "page", Field: "limit", Expected: "zero (no limit) or a positive number"}
	}
	if _, err := s.sortExpr(page.SortKey); err != nil {
		return nil, err
	}
	where, args, err := s.where(ctx, f, page)
	if err != nil {
		return nil, err
	}
	order, err := s.orderBy(page)
	if err != nil {
		return nil, err
	}
	q := "SELECT " + nodeSelectList + " FROM nodes" + where + order
	if page.Limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", page.Limit)
	}
	var rows *sql.Rows
	if st := s.readStmt(ctx, s.d.q(q)); st != nil {
		rows, err = st.QueryContext(ctx, args...)
	} else {
		rows, err = s.r.QueryContext(ctx, s.d.q(q), args...)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlstore: listing nodes: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var out []*baremetal.Node
	for rows.Next() {
		n, err := scanNode(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlstore: listing nodes: %w", err)
		}
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlstore: listing nodes: %w", err)
	}
	return out, nil
}

// CountNodes implements baremetal.NodeStore.
func (s *Store) CountNodes(ctx context.Context, f baremetal.NodeFilter) (int, error) {
	where, args, err := s.where(ctx, f, baremetal.Page{})
	if err != nil {
		return 0, err
	}
	var n int
	q := s.d.q("SELECT COUNT(*) FROM nodes" + where)
	var row *sqlx.Row
	if st := s.readStmt(ctx, q); st != nil {
		row = st.QueryRowxContext(ctx, args...)
	} else {
		row = s.r.QueryRowxContext(ctx, q, args...)
	}
	if err := row.Scan(&n); err != nil {
		return 0, fmt.Errorf("sqlstore: counting nodes: %w", err)
	}
	return n, nil
}

// UpdateNode implements baremetal.NodeStore.
func (s *Store) UpdateNode(ctx context.Context, n *baremetal.Node, holder string) error {
	return s.updateNode(ctx, n, holder, nil, false)
}

// UpdateNodeRecording implements baremetal.RecordingNodeStore: the
// compare-and-swap update and the history row it records commit in one
// transaction, or neither does.
func (s *Store) UpdateNodeRecording(ctx context.Context, n *baremetal.Node, holder string, e *baremetal.HistoryEntry) error {
	if err := checkEntryOf(n, e); err != nil {
		return err
	}
	return s.updateNode(ctx, n, holder, e, false)
}

// UpdateNodeReleasing implements baremetal.ReleasingNodeStore: the
// compare-and-swap update (fenced by holder's reservation), the history
// row and the release are one statement on PostgreSQL and one
// transaction on SQLite.
func (s *Store) UpdateNodeReleasing(ctx context.Context, n *baremetal.Node, holder string, e *baremetal.HistoryEntry) error {
	if err := checkHolder(holder); err != nil {
		return err
	}
	if err := checkEntryOf(n, e); err != nil {
		return err
	}
	return s.updateNode(ctx, n, holder, e, true)
}

// checkEntryOf fills e's node (when e is not nil and names none) and
// checks it is n.
func checkEntryOf(n *baremetal.Node, e *baremetal.HistoryEntry) error {
	if e == nil || n == nil {
		return nil
	}
	if e.NodeUUID == "" {
		e.NodeUUID = n.UUID
	}
	if !strings.EqualFold(e.NodeUUID, n.UUID) {
		return &baremetal.InvalidFieldError{Kind: "history", Ident: e.NodeUUID, Field: "node_uuid", Expected: "the UUID of the node updated (" + n.UUID + ")"}
	}
	return nil
}

// updateNode is UpdateNode, adding the history entry e in the same
// transaction when e is not nil, and clearing holder's reservation with
// the write when release is set.
func (s *Store) updateNode(ctx context.Context, n *baremetal.Node, holder string, e *baremetal.HistoryEntry, release bool) error {
	if err := checkUpdate(n); err != nil {
		return err
	}
	var hist historyRow
	if e != nil {
		var err error
		if hist, err = s.prepHistory(e); err != nil {
			return err
		}
		// The caller's copy is the node before the write: its stamp
		// gives the entry's duration.
		fillFromNode(e, n)
		hist.args = append(hist.args, nullIfEmpty(string(e.State)), nullIfEmpty(string(e.TargetState)), durationArg(e.Duration))
	}
	// The history row names the node by its key when the caller's copy
	// has it, by UUID otherwise; PostgreSQL's one statement takes the
	// values alone.
	histVals := slices.Clip(hist.args)
	histStmt := s.st.addHistoryID
	if e != nil {
		if n.ID != 0 {
			hist.args = append(histVals, n.ID)
		} else {
			histStmt = s.st.addHistory
			hist.args = append(histVals, micros(e.CreatedAt), strings.ToLower(n.UUID))
		}
	}
	cols, err := nodeArgs(n)
	if err != nil {
		return err
	}
	now := s.now()
	args := make([]any, 0, len(cols)+10)
	args = append(args, cols...)
	args = append(args, n.ProvisionState, n.TargetProvisionState, micros(now), timeArg(n.ProvisionUpdatedAt))
	args = append(args, micros(now), strings.ToLower(n.UUID), n.Version)
	stmt := s.st.update
	if holder != "" {
		stmt = s.st.updateHeld
		if release {
			stmt = s.st.updateRelease
		}
		args = append(args, holder)
	}
	var version, updated int64
	var provUpdated sql.NullInt64
	var histID int64
	if e == nil {
		err = s.write(ctx, func(w writeTx) error {
			return w.stmt(stmt).QueryRowxContext(w.ctx, args...).Scan(&version, &updated, &provUpdated)
		})
	} else if s.st.recordUpdate != nil {
		rec := s.st.recordUpdate
		switch {
		case release:
			rec = s.st.recordUpdateRelease
		case holder != "":
			rec = s.st.recordUpdateHeld
		}
		// One statement: the history values follow the update's.
		args = append(args, histVals...)
		err = rec.QueryRowxContext(ctx, args...).Scan(&version, &updated, &provUpdated, &histID)
	} else {
		err = s.writeAtomic(ctx, func(w writeTx) error {
			if err := w.stmt(stmt).QueryRowxContext(w.ctx, args...).Scan(&version, &updated, &provUpdated); err != nil {
				return err
			}
			var scan = []any{&histID}
			if histStmt == s.st.addHistory {
				var st, tgt string
				var d sql.NullInt64
				scan = append(scan, &st, &tgt, &d)
			}
			if err := w.stmt(histStmt).QueryRowxContext(w.ctx, hist.args...).Scan(scan...); err != nil {
				return fmt.Errorf("sqlstore: adding history to node %s: %w", n.UUID, err)
			}
			return nil
		})
	}
	if errors.Is(err, sql.ErrNoRows) {
		return s.explainConflict(ctx, n, holder)
	}
	if err != nil {
		switch classify(err) {
		case uniqueViolation:
			return s.explainNodeDuplicate(ctx, []*baremetal.Node{n}, err)
		case foreignKeyViolation:
			return s.explainNodeChassis(ctx, []*baremetal.Node{n}, err)
		}
		return fmt.Errorf("sqlstore: updating node %s: %w", n.UUID, err)
	}
	n.Version = version
	n.UpdatedAt = timeFrom(sql.NullInt64{Int64: updated, Valid: true})
	n.ProvisionUpdatedAt = timeFrom(provUpdated)
	if e != nil {
		e.ID, e.Event, e.Message = histID, hist.event, hist.message
	}
	if release {
		n.Reservation = ""
	}
	s.notify(baremetal.NodeChange{UUID: n.UUID, Op: "update", ProvisionState: n.ProvisionState,
		TargetProvisionState: n.TargetProvisionState, Reservation: n.Reservation, Version: n.Version})
	if release {
		s.notify(baremetal.NodeChange{UUID: n.UUID, Op: "release"})
	}
	return nil
}

// explainConflict builds the error of a compare-and-swap that matched no
// row.
func (s *Store) explainConflict(ctx context.Context, n *baremetal.Node, holder string) error {
	var res sql.NullString
	var version int64
	err := s.st.lockHolder.QueryRowxContext(ctx, strings.ToLower(n.UUID)).Scan(&res, &version)
	if errors.Is(err, sql.ErrNoRows) {
		return &baremetal.NotFoundError{Kind: "node", Ident: n.UUID}
	}
	if err != nil {
		return fmt.Errorf("sqlstore: node %s: write refused, and reading why failed: %w", n.UUID, err)
	}
	return &baremetal.ConflictError{Kind: "node", Ident: n.UUID, Expected: n.Version, Actual: version,
		Holder: holder, ActualHolder: res.String}
}

// TouchProvisioning implements baremetal.NodeStore.
func (s *Store) TouchProvisioning(ctx context.Context, id string) error {
	id = strings.ToLower(id)
	var ps, tps statemachine.State
	var version int64
	err := s.write(ctx, func(w writeTx) error {
		return w.stmt(s.st.touch).QueryRowxContext(w.ctx, micros(s.now()), id).Scan(&ps, &tps, &version)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return &baremetal.NotFoundError{Kind: "node", Ident: id}
	}
	if err != nil {
		return fmt.Errorf("sqlstore: touching node %s: %w", id, err)
	}
	s.notify(baremetal.NodeChange{UUID: id, Op: "touch", ProvisionState: ps, TargetProvisionState: tps, Version: version})
	return nil
}

// DeleteNode implements baremetal.NodeStore. Ports and history go with
// the node (ON DELETE CASCADE).
func (s *Store) DeleteNode(ctx context.Context, id string) error {
	id = strings.ToLower(id)
	res, err := s.w.ExecContext(ctx, s.d.q("DELETE FROM nodes WHERE uuid = ? AND reservation IS NULL"), id)
	if err != nil {
		return fmt.Errorf("sqlstore: deleting node %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		s.notify(baremetal.NodeChange{UUID: id, Op: "delete"})
		return nil
	}
	var holder sql.NullString
	var version int64
	err = s.st.lockHolder.QueryRowxContext(ctx, id).Scan(&holder, &version)
	if errors.Is(err, sql.ErrNoRows) {
		return &baremetal.NotFoundError{Kind: "node", Ident: id}
	}
	if err != nil {
		return fmt.Errorf("sqlstore: deleting node %s: %w", id, err)
	}
	return &baremetal.NodeInUseError{Node: id, Holder: holder.String}
}

// lookupBatch bounds the MAC addresses one lookup query binds: well below
// SQLite's limit on bound variables (SQLITE_MAX_VARIABLE_NUMBER: 999
// before 3.32, 32766 since) and PostgreSQL's 65535 bind parameters, so a
// long list is looked up in several queries instead of failing with "too
// many SQL variables".
const lookupBatch = 500

// LookupNode implements baremetal.NodeStore. The MAC addresses are
// normalised and deduplicated, then looked up lookupBatch at a time; the
// lookup stops as soon as a second node matches.
func (s *Store) LookupNode(ctx context.Context, id string, macs []string) (*baremetal.Node, error) {
	if id != "" {
		if !isUUID(id) {
			return nil, &baremetal.InvalidFieldError{Kind: "lookup", Field: "node_uuid", Expected: "a node UUID"}
		}
		return s.GetNode(ctx, id)
	}
	var valid []string
	seen := map[string]bool{}
	for _, m := range macs {
		if norm, err := baremetal.NormalizeMAC("addresses", m); err == nil && !seen[norm] {
			seen[norm] = true
			valid = append(valid, norm)
		}
	}
	if len(valid) == 0 {
		return nil, &baremetal.InvalidFieldError{Kind: "lookup", Field: "addresses", Expected: "a node UUID or at least one valid MAC address"}
	}
	notFound := &baremetal.NotFoundError{Kind: "node", Ident: "with MAC " + macList(valid)}
	owners := map[int64]bool{}
	for start := 0; start < len(valid) && len(owners) < 2; start += lookupBatch {
		batch := valid[start:min(start+lookupBatch, len(valid))]
		q := "SELECT DISTINCT node_id FROM ports WHERE address IN (" + strings.TrimSuffix(strings.Repeat("?, ", len(batch)), ", ") + ")"
		args := make([]any, len(batch))
		for i, v := range batch {
			args[i] = v
		}
		var ids []int64
		if err := s.r.SelectContext(ctx, &ids, s.d.q(q), args...); err != nil {
			return nil, fmt.Errorf("sqlstore: looking up node by MAC: %w", err)
		}
		for _, n := range ids {
			owners[n] = true
		}
	}
	if len(owners) != 1 {
		// None, or MACs of several nodes: Ironic answers both with the
		// same not-found.
		return nil, notFound
	}
	var owner int64
	for n := range owners {
		owner = n
	}
	n, err := scanNode(s.r.QueryRowxContext(ctx, s.d.q("SELECT "+nodeSelectList+" FROM nodes WHERE id = ?"), owner))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound
	}
	if err != nil {
		return nil, fmt.Errorf("sqlstore: looking up node by MAC: %w", err)
	}
	return n, nil
}

// macList names looked-up MAC addresses in an error: all of a short list,
// the first few of a long one and how many more, so an error about a
// lookup with thousands of addresses stays readable.
func macList(macs []string) string {
	const shown = 8
	if len(macs) <= shown {
		return strings.Join(macs, ",")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(macs[:shown], ","), len(macs)-shown)
}

// sortKinds classifies the sortable node columns that are not text:
// 'i' integers and times (NULL sorts as 0), 'b' NOT NULL booleans, 'p'
// nullable booleans (NULL sorts as false).
var sortKinds = map[string]byte{
	"id": 'i', "conductor_affinity": 'i', "provision_updated_at": 'i', "created_at": 'i',
	"updated_at": 'i', "inspection_started_at": 'i', "inspection_finished_at": 'i',
	"maintenance": 'b', "console_enabled": 'b', "protected": 'b', "retired": 'b',
	"disable_power_off": 'b', "automated_clean": 'p', "secure_boot": 'p',
}

// sortExpr is the SQL expression a node listing sorted by key orders by
// ("" is the ID). NULLs are folded into the smallest value so SQLite and
// PostgreSQL, which place NULLs differently, sort alike; text compares by
// bytes in both.
func (s *Store) sortExpr(key string) (string, error) {
	if key == "" {
		return "id", nil
	}
	if !slices.Contains(baremetal.NodeSortKeys(), key) {
		return "", &baremetal.InvalidFieldError{Kind: "page", Field: "sort_key", Ident: key,
			Expected: "a sortable node field: " + strings.Join(baremetal.NodeSortKeys(), ", ")}
	}
	switch sortKinds[key] {
	case 'i':
		return "COALESCE(" + key + ", 0)", nil
	case 'b':
		return key, nil
	case 'p':
		return "COALESCE(" + key + ", FALSE)", nil
	}
	return "COALESCE(" + key + ", '')" + s.d.collate, nil
}

// orderBy is the ORDER BY clause of a node listing.
func (s *Store) orderBy(page baremetal.Page) (string, error) {
	dir := ""
	if page.SortDesc {
		dir = " DESC"
	}
	if page.SortKey == "" || page.SortKey == "id" {
		return " ORDER BY id" + dir, nil
	}
	e, err := s.sortExpr(page.SortKey)
	if err != nil {
		return "", err
	}
	return " ORDER BY " + e + dir + ", id" + dir, nil
}
