package conductor_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/statemachine"
)

// lookupResult is one lookup the booting ramdisk made.
type lookupResult struct {
	status  int
	token   string
	elapsed time.Duration
}

// lookingUpPower is fake power whose power-on (or reboot) of a node
// prepared for a ramdisk boot looks the node up before it returns, as a
// ramdisk that boots faster than the BMC answers does: the conductor
// still holds the node's lock for the power action.
type lookingUpPower struct {
	*fake.Power
	apiURL func() string

	mu      sync.Mutex
	lookups []lookupResult
}

func (p *lookingUpPower) lookup(ctx context.Context, t *driver.Task) {
	if prepared, _ := t.InternalString(fake.BootPreparedKey); prepared != "ramdisk" {
		return
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.apiURL()+"/v1/lookup?node_uuid="+t.NodeUUID, nil)
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.68")
	start := time.Now()
	res := lookupResult{}
	if resp, err := http.DefaultClient.Do(req); err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		res.status = resp.StatusCode
		var lr agentclient.LookupResponse
		if json.Unmarshal(body, &lr) == nil {
			res.token = lr.Config.AgentToken
		}
	}
	res.elapsed = time.Since(start)
	p.mu.Lock()
	p.lookups = append(p.lookups, res)
	p.mu.Unlock()
}

func (p *lookingUpPower) SetPowerState(ctx context.Context, t *driver.Task, target driver.PowerState, timeout time.Duration) error {
	if err := p.Power.SetPowerState(ctx, t, target, timeout); err != nil {
		return err
	}
	if target == driver.PowerOn {
		p.lookup(ctx, t)
	}
	return nil
}

func (p *lookingUpPower) Reboot(ctx context.Context, t *driver.Task, timeout time.Duration) error {
	if err := p.Power.Reboot(ctx, t, timeout); err != nil {
		return err
	}
	p.lookup(ctx, t)
	return nil
}

// TestLookupDuringPowerOnAnswersPromptly boots a node into the cleaning
// ramdisk (by a power-on, and by a reboot of a node that is on) with a
// power interface that looks the node up while the conductor's power
// action still holds the node's lock: the lookup must answer
// 200 with a fresh token at once (not 409, after which IPA sleeps 5 s),
// the token must be the one the conductor stores, and a second lookup
// must get the masked value only.
func TestLookupDuringPowerOnAnswersPromptly(t *testing.T) {
	t.Parallel()
	for _, poweredOn := range []bool{false, true} {
		name := "power on"
		if poweredOn {
			name = "reboot"
		}
		t.Run(name, func(t *testing.T) { lookupDuringPowerAction(t, poweredOn) })
	}
}

// lookupDuringPowerAction is TestLookupDuringPowerOnAnswersPromptly with
// the node off (the conductor powers it on) or on (it reboots it).
func lookupDuringPowerAction(t *testing.T, poweredOn bool) {
	client, err := agentclient.NewClient(agentclient.ClientConfig{CommandTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	reg := driver.NewRegistry(driver.Config{
		EnabledHardwareTypes: []string{builtin.FakeHardware},
		EnabledInterfaces: map[driver.Kind][]string{
			driver.KindDeploy: {agentdeploy.Name, fake.Name},
			driver.KindPower:  {"lookup-power", fake.Name},
		},
	})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		t.Fatal(err)
	}
	if err := reg.RegisterInterface(driver.KindDeploy, agentdeploy.Name, agentdeploy.New(client)); err != nil {
		t.Fatal(err)
	}
	api := httptest.NewUnstartedServer(nil)
	t.Cleanup(api.Close)
	apiURL := "http://" + api.Listener.Addr().String()
	power := &lookingUpPower{Power: fake.NewPower(fake.Config{}), apiURL: func() string { return apiURL }}
	if err := reg.RegisterInterface(driver.KindPower, "lookup-power", power); err != nil {
		t.Fatal(err)
	}
	store := openStore(t, false)
	c, err := conductor.New(store, reg, conductor.Options{Agent: conductor.AgentSettings{Client: client, APIURL: apiURL}, Hostname: "lookup-conductor", Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx := serveAgentAPI(t, api, c)
	hs := &harness{t: t, store: store, c: c, ctx: ctx}
	n, err := c.Enroll(ctx, &baremetal.Node{Name: uniqueName("lookup-lock"), Driver: builtin.FakeHardware,
		PowerInterface: "lookup-power", DeployInterface: agentdeploy.Name})
	hs.must(err)
	hs.must(c.Manage(ctx, n.UUID))
	hs.waitFor(n.UUID, statemachine.Manageable)
	if poweredOn {
		cur, err := store.GetNode(ctx, n.UUID)
		hs.must(err)
		cur.DriverInternalInfo[fake.PowerStateKey] = string(driver.PowerOn)
		cur.PowerState = driver.PowerOn
		hs.must(store.UpdateNode(ctx, cur, ""))
	}
	hs.must(c.Provide(ctx, n.UUID))
	w := hs.waitFor(n.UUID, statemachine.CleanWait)

	power.mu.Lock()
	lookups := append([]lookupResult(nil), power.lookups...)
	power.mu.Unlock()
	if len(lookups) != 1 {
		t.Fatalf("%d lookups during the power-on, want 1", len(lookups))
	}
	got := lookups[0]
	if got.status != http.StatusOK || len(got.token) < 32 || got.token == agentclient.MaskedToken {
		t.Fatalf("lookup during the held power-on: HTTP %d, token of %d characters; want 200 with a fresh token", got.status, len(got.token))
	}
	if got.elapsed > 2*time.Second {
		t.Fatalf("lookup during the held power-on took %v", got.elapsed)
	}
	if stored, _ := w.DriverInternalInfo[driver.InternalAgentToken].(string); stored != got.token {
		t.Fatal("the token the lookup returned is not the token the conductor stored")
	}
	// The token is disclosed once.
	power.lookup(ctx, &driver.Task{NodeUUID: n.UUID, DriverInternalInfo: map[string]any{fake.BootPreparedKey: "ramdisk"}})
	power.mu.Lock()
	again := power.lookups[len(power.lookups)-1]
	power.mu.Unlock()
	if again.status != http.StatusOK || again.token != agentclient.MaskedToken {
		t.Fatalf("second lookup: HTTP %d token %q, want 200 with the masked token", again.status, again.token)
	}
}
