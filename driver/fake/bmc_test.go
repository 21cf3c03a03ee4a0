package fake_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/fake"
)

// TestFakeBMCRejectsBadSettings checks every simulated BMC key is refused
// with an error naming node and key, at Validate and at the call itself.
func TestFakeBMCRejectsBadSettings(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		key string
		val any
	}{
		{fake.BMCLatencyKey, "fast"},
		{fake.BMCLatencyKey, "-1ms"},
		{fake.BMCLatencyKey, "2m"},
		{fake.BMCLatencyKey, 100},
		{fake.BMCAddressKey, ""},
		{fake.BMCAddressKey, 7.0},
		{fake.BMCAddressKey, strings.Repeat("a", 256)},
		{fake.BMCConcurrencyKey, 0.0},
		{fake.BMCConcurrencyKey, 1.5},
		{fake.BMCConcurrencyKey, "65"},
		{fake.BMCConcurrencyKey, "two"},
		{fake.BMCConcurrencyKey, true},
	}
	p := fake.NewPower(fake.Config{})
	for _, c := range cases {
		task := newTask()
		task.DriverInfo[c.key] = c.val
		var ip *driver.InvalidParameterError
		if err := p.Validate(ctx, task); !errors.As(err, &ip) || ip.Key != c.key || ip.Node != task.NodeUUID {
			t.Errorf("%s=%v: Validate = %v", c.key, c.val, err)
		}
		if _, err := p.GetPowerState(ctx, task); !errors.As(err, &ip) || ip.Key != c.key {
			t.Errorf("%s=%v: GetPowerState = %v", c.key, c.val, err)
		}
	}
	task := newTask()
	task.DriverInfo[fake.BMCLatencyKey] = "20ms"
	task.DriverInfo[fake.BMCAddressKey] = "10.0.0.9"
	task.DriverInfo[fake.BMCConcurrencyKey] = "4"
	if err := p.Validate(ctx, task); err != nil {
		t.Errorf("good settings: %v", err)
	}
	task.DriverInfo[fake.BMCConcurrencyKey] = 4.0
	if err := p.Validate(ctx, task); err != nil {
		t.Errorf("good numeric concurrency: %v", err)
	}
}

// TestFakeBMCLatencyAndSlots checks calls take the latency, that one BMC
// with one slot serialises a node's power and management calls, and that
// Validate reads no hardware.
func TestFakeBMCLatencyAndSlots(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	inFlight, peak, slept := 0, 0, 0
	var total time.Duration
	// The injected sleep records how many calls hold a slot at once.
	cfg := fake.Config{BMCs: fake.NewBMCs(), Sleep: func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		inFlight++
		peak = max(peak, inFlight)
		slept++
		total += d
		mu.Unlock()
		time.Sleep(2 * time.Millisecond)
		mu.Lock()
		inFlight--
		mu.Unlock()
		return nil
	}}
	p, m := fake.NewPower(cfg), fake.NewManagement(cfg)
	run := func(tasks ...*driver.Task) {
		var wg sync.WaitGroup
		for i, task := range tasks {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var err error
				if i%2 == 0 {
					_, err = p.GetPowerState(ctx, task)
				} else {
					_, err = m.GetBootDevice(ctx, task)
				}
				if err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	task := func(extra map[string]any) *driver.Task {
		tk := newTask()
		tk.DriverInfo[fake.BMCLatencyKey] = "100ms"
		for k, v := range extra {
			tk.DriverInfo[k] = v
		}
		return tk
	}
	// One node, its own BMC, default one slot: eight calls, one at a time.
	one := task(nil)
	run(one, one, one, one, one, one, one, one)
	if peak != 1 || slept != 8 || total != 800*time.Millisecond {
		t.Errorf("own BMC: peak %d, %d calls slept %v; want 1, 8, 800ms", peak, slept, total)
	}
	// Two nodes sharing a BMC with two slots.
	peak = 0
	a := task(map[string]any{fake.BMCAddressKey: "chassis-1", fake.BMCConcurrencyKey: 2.0})
	b := task(map[string]any{fake.BMCAddressKey: "chassis-1", fake.BMCConcurrencyKey: 2.0})
	b.NodeUUID = "0d7c3f6a-3f0e-4d8e-9b1a-5b0f1c2d3e4f"
	run(a, b, a, b, a, b, a, b, a, b)
	if peak != 2 {
		t.Errorf("shared BMC with 2 slots: peak %d", peak)
	}
	// Validate and non-BMC kinds take no latency.
	slept = 0
	if err := p.Validate(ctx, one); err != nil {
		t.Fatal(err)
	}
	if err := fake.NewBoot(cfg).PrepareInstance(ctx, one); err != nil {
		t.Fatal(err)
	}
	if slept != 0 {
		t.Errorf("validate and boot slept %d times", slept)
	}
	// A real wait honours cancellation while queued for a busy slot.
	timed := fake.Config{BMCs: fake.NewBMCs()}
	slow := task(map[string]any{fake.BMCLatencyKey: "1m"})
	hctx, stopHolder := context.WithCancel(ctx)
	held := make(chan error, 1)
	go func() {
		_, err := fake.NewPower(timed).GetPowerState(hctx, slow)
		held <- err
	}()
	time.Sleep(20 * time.Millisecond)
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := fake.NewManagement(timed).GetBootDevice(cctx, slow); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("queued call = %v, want deadline exceeded", err)
	}
	stopHolder()
	if err := <-held; !errors.Is(err, context.Canceled) {
		t.Errorf("slot holder = %v, want canceled", err)
	}
}
