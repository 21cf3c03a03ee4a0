package faultlab

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/statemachine"
)

// FleetConfig says what StartFleet builds.
type FleetConfig struct {
	// DSN is a postgres:// URL of a schema of the caller's own; the
	// store reaches it through a new Proxy.
	DSN string
	// Nodes is the number of nodes driven; one more, the spare, is
	// enrolled beside them.
	Nodes int
	// Delay is what every fake operation takes.
	Delay time.Duration
	// Logger receives the conductor's logs; nil discards them.
	Logger *slog.Logger
}

// StartFleet opens a PostgreSQL store through a new proxy, starts a
// conductor on it with fake hardware, and enrolls the nodes and the
// spare, all made available. stop stops the conductor, closes the store
// and the proxy.
func StartFleet(ctx context.Context, cfg FleetConfig) (f Fleet, stop func(), err error) {
	up, err := Upstream(cfg.DSN)
	if err != nil {
		return f, nil, err
	}
	p, err := Listen(up)
	if err != nil {
		return f, nil, err
	}
	pdsn, err := RewriteDSN(cfg.DSN, p.Addr())
	if err != nil {
		_ = p.Close()
		return f, nil, err
	}
	store, err := sqlstore.OpenPostgres(ctx, pdsn, sqlstore.Options{})
	if err != nil {
		_ = p.Close()
		return f, nil, err
	}
	f, stopFleet, err := StartFleetOn(ctx, store, p, cfg)
	if err != nil {
		_ = store.Close()
		_ = p.Close()
		return f, nil, err
	}
	f.Proxy = p
	return f, func() {
		p.Restore()
		stopFleet()
		_ = store.Close()
		_ = p.Close()
	}, nil
}

// StartFleetOn is StartFleet on a store of the caller's (cfg.DSN is not
// used), with fault as what Run cuts and restores: a conductor with fake
// hardware on store, the nodes and the spare enrolled and made available.
// stop restores the fault and stops the conductor; the store stays the
// caller's to close.
func StartFleetOn(ctx context.Context, store baremetal.Store, fault Fault, cfg FleetConfig) (f Fleet, stop func(), err error) {
	reg := driver.NewRegistry(driver.Config{EnabledHardwareTypes: []string{builtin.FakeHardware}})
	if err := reg.Register(builtin.Bundle(fake.Config{Delays: map[string]time.Duration{"*": cfg.Delay}})); err != nil {
		return f, nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c, err := conductor.New(store, reg, conductor.Options{Hostname: fmt.Sprintf("faultlab-%d", time.Now().UnixNano()), Logger: log})
	if err != nil {
		return f, nil, err
	}
	if err := c.Launch(ctx); err != nil {
		return f, nil, err
	}
	stop = func() {
		fault.Restore()
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = c.Stop(sctx)
	}
	f = Fleet{Conductor: c, Store: store, Fault: fault}
	uuids := make([]string, cfg.Nodes+1)
	for i := range uuids {
		n, err := c.Enroll(ctx, &baremetal.Node{Name: fmt.Sprintf("faultlab-%d", i), Driver: builtin.FakeHardware})
		if err != nil {
			stop()
			return f, nil, err
		}
		uuids[i] = n.UUID
	}
	f.Spare, f.Nodes = uuids[0], uuids[1:]
	if _, err := Drive(ctx, f, uuids, statemachine.Manageable, c.Manage); err != nil {
		stop()
		return f, nil, err
	}
	if _, err := Drive(ctx, f, uuids, statemachine.Available, c.Provide); err != nil {
		stop()
		return f, nil, err
	}
	return f, stop, nil
}

// Drive runs verb on every node of uuids, 16 at a time (retrying the
// concurrency limits' refusals), and waits until each is in state with
// no reservation; it returns how long that took.
func Drive(ctx context.Context, f Fleet, uuids []string, state statemachine.State, verb func(context.Context, string) error) (time.Duration, error) {
	start := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	errs := make(chan error, len(uuids))
	for _, u := range uuids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			for {
				err := verb(ctx, u)
				if !errors.Is(err, conductor.ErrConcurrentActionLimit) {
					errs <- err
					return
				}
				select {
				case <-ctx.Done():
					errs <- ctx.Err()
					return
				case <-time.After(50 * time.Millisecond):
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return 0, fmt.Errorf("faultlab: verb towards %s: %w", state, err)
		}
	}
	deadline := time.Now().Add(5 * time.Minute)
	for _, u := range uuids {
		for {
			n, err := f.Store.GetNode(ctx, u)
			if err != nil {
				return 0, err
			}
			if n.ProvisionState == state && n.Reservation == "" {
				break
			}
			if time.Now().After(deadline) {
				return 0, fmt.Errorf("faultlab: node %s: %s (reserved by %q, last error %q), want %s", u, n.ProvisionState, n.Reservation, n.LastError, state)
			}
			select {
			case <-ctx.Done():
				return 0, ctx.Err()
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	return time.Since(start), nil
}
