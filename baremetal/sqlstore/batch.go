package sqlstore

import (
	"context"
	"fmt"
	"sync"

	"github.com/jmoiron/sqlx"
)

// maxBatch bounds how many single-statement writes share one SQLite
// transaction.
const maxBatch = 64

// writeOp is one hot write (reserve, release, update, touch) waiting for
// the SQLite writer. run executes its statements through the writeTx it is
// given and must not use the store's connections in any other way: while
// it runs, its batch may hold the only write connection. An op that is
// not atomic runs exactly one statement.
type writeOp struct {
	ctx  context.Context
	run  func(w writeTx) error
	done chan error    // receives the op's outcome once committed
	lead chan struct{} // receives when the op's caller must run the next batch
	// atomic ops run several statements that must commit together, so
	// they run in a transaction even alone.
	atomic bool
}

// writeTx gives a write op its statements: bound to the batch transaction
// when several ops share one, the pooled prepared statements otherwise.
type writeTx struct {
	ctx context.Context
	tx  *sqlx.Tx
}

func (w writeTx) stmt(st *sqlx.Stmt) *sqlx.Stmt {
	if w.tx == nil {
		return st
	}
	return w.tx.StmtxContext(w.ctx, st)
}

// batcher is SQLite's group commit. SQLite commits one transaction at a
// time and each commit costs system calls (WAL append, lock handling) that
// dominate a one-row update. When several goroutines write at once, one
// of them (the leader) runs the queued statements in a single
// transaction, each op of several statements under its own savepoint so
// that one failing op does not undo the others (a single statement is
// undone alone anyway), and commits once; then it hands the
// leadership to the oldest waiting op, so no caller runs other callers'
// work for long. A lone writer runs its statement at once, in autocommit,
// without any hand-off. There is no background goroutine.
type batcher struct {
	db *sqlx.DB

	mu      sync.Mutex
	pending []*writeOp
	leading bool
}

// submit runs fn, alone or in a batch, and returns its outcome after the
// commit.
func (b *batcher) submit(ctx context.Context, atomic bool, fn func(w writeTx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	op := &writeOp{ctx: ctx, run: fn, done: make(chan error, 1), lead: make(chan struct{}, 1), atomic: atomic}
	b.mu.Lock()
	b.pending = append(b.pending, op)
	if b.leading {
		b.mu.Unlock()
		// Once queued the op is waited for: it may commit, and the caller
		// must learn whether it did.
		select {
		case err := <-op.done:
			return err
		case <-op.lead:
		}
	} else {
		b.leading = true
		b.mu.Unlock()
	}
	b.leadOnce()
	return <-op.done
}

// leadOnce runs the oldest pending ops (the caller's among them) as one
// batch, then passes the leadership on or gives it up.
func (b *batcher) leadOnce() {
	b.mu.Lock()
	n := min(len(b.pending), maxBatch)
	batch := append([]*writeOp(nil), b.pending[:n]...)
	b.pending = append(b.pending[:0], b.pending[n:]...)
	b.mu.Unlock()

	b.run(batch)

	b.mu.Lock()
	if len(b.pending) > 0 {
		b.pending[0].lead <- struct{}{}
	} else {
		b.leading = false
	}
	b.mu.Unlock()
}

// run executes a batch and reports to every op.
func (b *batcher) run(batch []*writeOp) {
	if len(batch) == 1 && !batch[0].atomic {
		op := batch[0]
		if err := op.ctx.Err(); err != nil {
			op.done <- err
			return
		}
		op.done <- op.run(writeTx{ctx: op.ctx})
		return
	}
	errs := make([]error, len(batch))
	tx, err := b.db.BeginTxx(context.Background(), nil)
	if err != nil {
		for _, op := range batch {
			op.done <- fmt.Errorf("sqlstore: begin: %w", err)
		}
		return
	}
	if len(batch) == 1 {
		// A lone atomic op needs no savepoint: the transaction is its own.
		op := batch[0]
		if err := op.ctx.Err(); err != nil {
			_ = tx.Rollback()
			op.done <- err
			return
		}
		if err := op.run(writeTx{ctx: op.ctx, tx: tx}); err != nil {
			_ = tx.Rollback()
			op.done <- err
			return
		}
		if err := tx.Commit(); err != nil {
			op.done <- fmt.Errorf("sqlstore: commit: %w", err)
			return
		}
		op.done <- nil
		return
	}
	for i, op := range batch {
		if err := op.ctx.Err(); err != nil {
			errs[i] = err
			continue
		}
		if !op.atomic {
			// A single statement needs no savepoint: SQLite undoes a
			// failing statement alone (from its statement journal) and
			// the transaction goes on. That saves two statements per op.
			errs[i] = op.run(writeTx{ctx: op.ctx, tx: tx})
			continue
		}
		if _, err := tx.Exec("SAVEPOINT op"); err != nil {
			errs[i] = err
			continue
		}
		errs[i] = op.run(writeTx{ctx: op.ctx, tx: tx})
		if errs[i] != nil {
			_, _ = tx.Exec("ROLLBACK TO op")
		}
		if _, err := tx.Exec("RELEASE op"); err != nil && errs[i] == nil {
			errs[i] = err
		}
	}
	if err := tx.Commit(); err != nil {
		for i := range errs {
			if errs[i] == nil {
				errs[i] = fmt.Errorf("sqlstore: commit: %w", err)
			}
		}
	}
	for i, op := range batch {
		op.done <- errs[i]
	}
}

// write runs a hot write: through the batcher on SQLite, directly on
// PostgreSQL, where transactions run side by side.
func (s *Store) write(ctx context.Context, fn func(w writeTx) error) error {
	if s.batch == nil {
		return fn(writeTx{ctx: ctx})
	}
	return s.batch.submit(ctx, false, fn)
}

// writeAtomic runs a hot write of several statements in one transaction:
// through the batcher on SQLite (where the op's savepoint keeps its
// statements together), in a transaction of its own on PostgreSQL.
func (s *Store) writeAtomic(ctx context.Context, fn func(w writeTx) error) error {
	if s.batch != nil {
		return s.batch.submit(ctx, true, fn)
	}
	tx, err := s.w.BeginTxx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlstore: begin: %w", err)
	}
	if err := fn(writeTx{ctx: ctx, tx: tx}); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlstore: commit: %w", err)
	}
	return nil
}
