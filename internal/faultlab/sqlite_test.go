package faultlab_test

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/internal/faultlab"
	"github.com/anvilmetal/anvil/statemachine"
)

// sqliteChildEnv marks the re-executed test binary that runs the SQLite
// storage faults in a mount namespace of its own.
const sqliteChildEnv = "ANVIL_FAULTLAB_SQLITE_CHILD"

// diskFull fills the file system holding the database (a small tmpfs of
// the test's own) with a filler file until it has no room left, and
// removes it on Restore.
type diskFull struct {
	dir string
	db  string // the database file, whose WAL Cut empties first

	mu    sync.Mutex
	cut   bool
	cutAt time.Time
	err   error
}

func (d *diskFull) Cut() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cut, d.cutAt = true, time.Now()
	// A write that fits in frames the WAL already has succeeds on a full
	// disk (a CI run saw every write probe of the cut succeed): empty
	// the WAL first, so that the next write must grow it and meets the
	// full disk.
	if err := truncateWAL(d.db); err != nil {
		d.err = err
		return
	}
	f, err := os.Create(filepath.Join(d.dir, "filler"))
	if err != nil {
		d.err = err
		return
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				d.err = err
			}
			break
		}
	}
	// The last bytes: a partial page may still fit.
	for {
		if _, err := f.Write(buf[:512]); err != nil {
			break
		}
	}
}

// truncateWAL checkpoints the SQLite database at path and truncates its
// WAL to nothing, waiting out the readers that hold it.
func truncateWAL(path string) error {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		return err
	}
	defer db.Close()
	for try := 0; ; try++ {
		var busy, logFrames, done int
		if err := db.QueryRow("PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logFrames, &done); err != nil {
			return err
		}
		if busy == 0 {
			return nil
		}
		if try == 100 {
			return errors.New("wal_checkpoint(TRUNCATE) stayed busy for a second")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (d *diskFull) Restore() time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.cut {
		return 0
	}
	d.cut = false
	if err := os.Remove(filepath.Join(d.dir, "filler")); err != nil && d.err == nil {
		d.err = err
	}
	return time.Since(d.cutAt)
}

// unwritable makes every file of this process unwritable: its file size
// limit (RLIMIT_FSIZE) drops to 0, so each write to a regular file fails
// with EFBIG (SQLite: SQLITE_IOERR_WRITE), until Restore puts the limit
// back. Only the re-executed child process, which runs nothing else, uses
// it.
type unwritable struct {
	mu    sync.Mutex
	cut   bool
	old   syscall.Rlimit
	cutAt time.Time
	err   error
}

func (u *unwritable) Cut() {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.cut, u.cutAt = true, time.Now()
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &u.old); err != nil {
		u.err = err
		return
	}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: 0, Max: u.old.Max}); err != nil {
		u.err = err
	}
}

func (u *unwritable) Restore() time.Duration {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !u.cut {
		return 0
	}
	u.cut = false
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &u.old); err != nil && u.err == nil {
		u.err = err
	}
	return time.Since(u.cutAt)
}

// TestSQLiteStorageFaults: with SQLite, nodes cycling through undeploy
// while the database's disk fills up, and while its files cannot be
// written, all settle with no reservation within 30 s of the fault's end,
// and no request hangs meanwhile (issue 31). The conductor used to take
// SQLite's "database or disk is full" and I/O errors for final: a release
// or state write that met them was not retried, leaving nodes reserved in
// "-ing" states until a restart.
//
// The disk is a tmpfs mounted for the test: it needs root, so the test
// binary runs itself again under unshare(1) in a private mount namespace,
// where the mount goes away with the process.
func TestSQLiteStorageFaults(t *testing.T) {
	if os.Getenv(sqliteChildEnv) == "" {
		if testing.Short() {
			t.Skip("SQLite storage fault test skipped in -short mode")
		}
		if os.Geteuid() != 0 {
			t.Skip("needs root: the SQLite disk-full test mounts a small tmpfs in a private mount namespace")
		}
		unshare, err := exec.LookPath("unshare")
		if err != nil {
			t.Skip("needs unshare(1) (util-linux) for a private mount namespace")
		}
		args := []string{"--mount", "--propagation", "private", os.Args[0], "-test.run=^TestSQLiteStorageFaults$", "-test.count=1"}
		if testing.Verbose() {
			args = append(args, "-test.v")
		}
		cmd := exec.Command(unshare, args...)
		cmd.Env = append(os.Environ(), sqliteChildEnv+"=1")
		out, err := cmd.CombinedOutput()
		t.Logf("in a private mount namespace:\n%s", out)
		if err != nil {
			t.Fatalf("the SQLite storage fault test failed: %v", err)
		}
		return
	}
	for _, tc := range []struct {
		name  string
		fault func(dir string) faultFault
	}{
		{"disk full", func(dir string) faultFault { return &diskFull{dir: dir, db: filepath.Join(dir, "anvil.db")} }},
		{"file unwritable", func(string) faultFault { return &unwritable{} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			// Room for the database and its WAL, and little more.
			if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size=24m"); err != nil {
				t.Fatalf("mounting a tmpfs on %s: %v", dir, err)
			}
			defer func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) }()
			fault := tc.fault(dir)
			sqliteOutage(t, filepath.Join(dir, "anvil.db"), fault)
			if err := fault.failed(); err != nil {
				t.Fatalf("the fault itself failed: %v", err)
			}
		})
	}
}

// faultFault is a storage fault that says whether it could be applied.
type faultFault interface {
	faultlab.Fault
	failed() error
}

func (d *diskFull) failed() error   { d.mu.Lock(); defer d.mu.Unlock(); return d.err }
func (u *unwritable) failed() error { u.mu.Lock(); defer u.mu.Unlock(); return u.err }

// sqliteOutage runs the outage scenario on a SQLite store at path: 40
// nodes deploy (the baseline), then undeploy while fault cuts the storage
// for 3 s.
func sqliteOutage(t *testing.T, path string, fault faultlab.Fault) {
	ctx := context.Background()
	store, err := sqlstore.OpenSQLite(ctx, path, sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	logLevel := slog.LevelError
	if testing.Verbose() {
		logLevel = slog.LevelWarn
	}
	f, stop, err := faultlab.StartFleetOn(ctx, store, fault, faultlab.FleetConfig{Nodes: 40, Delay: 30 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel}))})
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	c := f.Conductor
	deploy := func(ctx context.Context, u string) error { return c.Deploy(ctx, u, conductor.DeployOptions{}) }
	baseline := forAll(t, f, f.Nodes, statemachine.Active, deploy)
	rep, err := faultlab.Run(ctx, f, faultlab.Cut{Verb: c.Undeploy, After: baseline / 4, Length: 3 * time.Second, Settle: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	checkRecovery(t, rep, baseline)
	if rep.FailedWrites == 0 {
		t.Fatalf("no write probe failed during the %v fault: it never reached the database", rep.Cut)
	}
	t.Logf("%d of the write probes during the fault failed", rep.FailedWrites)
}
