package fake

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/anvilmetal/anvil/driver"
)

// driver_info keys of the simulated BMC, which makes the fake power and
// management implementations cost what a real BMC's answers cost: every
// power and management operation (Validate excepted, which reads no
// hardware) first waits for a free slot of its node's BMC, then holds it
// for the latency. Benchmarks set them so that the conductor's own
// concurrency (its workers, the power sync's workers) is what is measured
// against realistic hardware, also through a plugin process, where the
// wait happens inside the plugin.
const (
	// BMCLatencyKey holds a Go duration ("100ms" IPMI-like, "20ms"
	// Redfish-like) every power and management call takes while holding
	// a slot of the node's BMC; between 0 and MaxBMCLatency.
	BMCLatencyKey = "fake_bmc_latency"
	// BMCAddressKey names the node's BMC; nodes naming the same address
	// share its slots (a chassis manager serving several blades). Absent
	// means a BMC of the node's own, as on a rack server.
	BMCAddressKey = "fake_bmc_address"
	// BMCConcurrencyKey is how many calls the node's BMC serves at once,
	// a whole number from 1 to MaxBMCConcurrency (a number or a decimal
	// string); default 1, as an IPMI BMC serves one session at a time.
	// Nodes sharing an address should agree; the value of the call that
	// found the BMC idle wins.
	BMCConcurrencyKey = "fake_bmc_concurrency"
)

// Bounds of the simulated BMC's driver_info values.
const (
	MaxBMCLatency     = time.Minute
	MaxBMCConcurrency = 64
	maxBMCAddressLen  = 255
)

// BMCs is the set of simulated BMCs that fake implementations sharing it
// contend for. builtin.Bundle gives every implementation of its bundle
// one set, so that a node's power and management calls queue at the same
// BMC; a Config without one gives each implementation its own. It holds
// only the calls in flight, never node state: an idle BMC is forgotten.
type BMCs struct {
	mu    sync.Mutex
	slots map[string]*bmcSlots
}

type bmcSlots struct {
	sem   chan struct{}
	users int
}

// NewBMCs returns an empty set of simulated BMCs.
func NewBMCs() *BMCs { return &BMCs{slots: map[string]*bmcSlots{}} }

// acquire waits for a slot of the BMC at addr (created with limit slots
// when idle) and returns its release.
func (b *BMCs) acquire(ctx context.Context, addr string, limit int) (func(), error) {
	b.mu.Lock()
	s := b.slots[addr]
	if s == nil {
		s = &bmcSlots{sem: make(chan struct{}, limit)}
		b.slots[addr] = s
	}
	s.users++
	b.mu.Unlock()
	leave := func() {
		b.mu.Lock()
		if s.users--; s.users == 0 {
			delete(b.slots, addr)
		}
		b.mu.Unlock()
	}
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		leave()
		return nil, ctx.Err()
	}
	return func() { <-s.sem; leave() }, nil
}

// bmcSettings is a node's simulated BMC as its driver_info describes it.
type bmcSettings struct {
	latency time.Duration
	address string
	limit   int
}

// bmcSettingsOf parses the simulated BMC's keys strictly: a present key
// with a bad value is an *driver.InvalidParameterError naming it, at
// Validate and at every call alike, so a typo never silently measures
// hardware without latency.
func (f *fakeBase) bmcSettingsOf(t *driver.Task) (bmcSettings, error) {
	s := bmcSettings{address: "node:" + t.NodeUUID, limit: 1}
	bad := func(key, expected string) error {
		return &driver.InvalidParameterError{Node: t.NodeUUID, Kind: f.kind, Impl: Name, Field: "driver_info", Key: key, Expected: expected}
	}
	if v, ok := t.DriverInfo[BMCLatencyKey]; ok {
		str, _ := v.(string)
		d, err := time.ParseDuration(str)
		if err != nil || d < 0 || d > MaxBMCLatency {
			return s, bad(BMCLatencyKey, fmt.Sprintf("a Go duration from 0 to %s such as \"100ms\", got %v", MaxBMCLatency, v))
		}
		s.latency = d
	}
	if v, ok := t.DriverInfo[BMCAddressKey]; ok {
		str, _ := v.(string)
		if str == "" || len(str) > maxBMCAddressLen {
			return s, bad(BMCAddressKey, fmt.Sprintf("a non-empty string of at most %d bytes, got %v", maxBMCAddressLen, v))
		}
		s.address = "bmc:" + str
	}
	if v, ok := t.DriverInfo[BMCConcurrencyKey]; ok {
		n, ok := wholeNumber(v)
		if !ok || n < 1 || n > MaxBMCConcurrency {
			return s, bad(BMCConcurrencyKey, fmt.Sprintf("a whole number from 1 to %d, got %v", MaxBMCConcurrency, v))
		}
		s.limit = n
	}
	return s, nil
}

// wholeNumber reads v as driver_info carries numbers: a JSON number or a
// decimal string.
func wholeNumber(v any) (int, bool) {
	switch x := v.(type) {
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > 1e9 {
			return 0, false
		}
		return int(x), true
	case int:
		return x, true
	case int64:
		return int(x), true
	case string:
		n, err := strconv.Atoi(x)
		return n, err == nil
	}
	return 0, false
}

// usesBMC reports whether op of this implementation talks to the BMC.
func (f *fakeBase) usesBMC(op string) bool {
	return (f.kind == driver.KindPower || f.kind == driver.KindManagement) && op != "validate"
}

// callBMC waits for a slot of the node's simulated BMC and holds it for the
// latency; nothing happens when the node sets no latency.
func (f *fakeBase) callBMC(ctx context.Context, t *driver.Task) error {
	s, err := f.bmcSettingsOf(t)
	if err != nil || s.latency == 0 {
		return err
	}
	release, err := f.cfg.BMCs.acquire(ctx, s.address, s.limit)
	if err != nil {
		return err
	}
	defer release()
	sleep := f.cfg.Sleep
	if sleep == nil {
		sleep = sleepCtx
	}
	return sleep(ctx, s.latency)
}
