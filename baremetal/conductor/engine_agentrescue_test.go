package conductor_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/agentclient/agenttest"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/internal/shacrypt"
	"github.com/anvilmetal/anvil/statemachine"
)

// rescuePassword is the rescue password of these tests: it must never
// appear in a log, an error, a view or the agent's commands.
const rescuePassword = "r3scue-Pässword"

// activeAgentNode deploys an agent node with the agent rescue interface
// and returns it active.
func activeAgentNode(t *testing.T, h *agentHarness, name string) *baremetal.Node {
	t.Helper()
	n := h.enrollAgentNode(name)
	if _, err := h.c.Update(h.ctx, n.UUID, func(nd *baremetal.Node) error {
		nd.RescueInterface = agentdeploy.RescueName
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	h.must(h.c.Manage(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Manageable)
	h.must(h.c.Provide(h.ctx, n.UUID))
	h.waitFor(n.UUID, statemachine.Available)
	h.must(h.c.Deploy(h.ctx, n.UUID, conductor.DeployOptions{}))
	return h.waitFor(n.UUID, statemachine.Active)
}

// noRescueSecret fails when the node's record (its JSON) or history
// holds the rescue password or its hash.
func noRescueSecret(t *testing.T, h *agentHarness, n *baremetal.Node, hash string) {
	t.Helper()
	b, err := json.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{rescuePassword, hash} {
		if secret != "" && strings.Contains(string(b), secret) {
			t.Errorf("the node record holds a rescue secret: %s", b)
		}
	}
	if _, ok := n.InstanceInfo["rescue_password"]; ok {
		t.Errorf("instance_info keeps rescue_password")
	}
	if _, ok := n.InstanceInfo["hashed_rescue_password"]; ok {
		t.Errorf("instance_info keeps hashed_rescue_password")
	}
	hist, err := h.store.ListHistory(h.ctx, n.UUID, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range hist {
		if strings.Contains(e.Message, rescuePassword) || (hash != "" && strings.Contains(e.Message, hash)) {
			t.Errorf("history entry %q holds a rescue secret", e.Message)
		}
	}
}

// finalizeCall returns the agent's one finalize_rescue command.
func finalizeCall(t *testing.T, a *agenttest.Agent) agenttest.Execution {
	t.Helper()
	var calls []agenttest.Execution
	for _, e := range a.Executed() {
		if e.Command == agentclient.CmdFinalizeRescue {
			calls = append(calls, e)
		}
		if strings.Contains(string(e.Body), rescuePassword) {
			t.Errorf("the agent got the plain rescue password in %s: %s", e.Command, e.Body)
		}
	}
	if len(calls) != 1 {
		t.Fatalf("finalize_rescue ran %d times, want 1", len(calls))
	}
	return calls[0]
}

// TestAgentRescue rescues an active node with the agent rescue
// interface: the rescue ramdisk boots, its agent gets the password's
// SHA-256 crypt hash with hashed=true (never the password), the node is
// "rescue" with the ramdisk running and the rescue ramdisk's boot
// cleaned up; unrescue boots the instance from disk again with no
// ramdisk, and neither the password nor its hash is left anywhere.
func TestAgentRescue(t *testing.T) {
	t.Parallel()
	h := newAgentHarness(t, conductor.Options{}, nil)
	n := activeAgentNode(t, h, "rescue-1")
	boots := h.fleet.Boots(n.UUID)

	h.must(h.c.Rescue(h.ctx, n.UUID, rescuePassword))
	r := h.waitFor(n.UUID, statemachine.Rescue)
	if got := h.fleet.Boots(n.UUID); got != boots+1 {
		t.Fatalf("ramdisk boots after rescue = %d, want %d", got, boots+1)
	}
	a := h.fleet.Agent(n.UUID)
	if a == nil {
		t.Fatal("no agent running on the rescued node")
	}
	call := finalizeCall(t, a)
	hash, _ := call.Params["rescue_password"].(string)
	if call.Params["hashed"] != true || !strings.HasPrefix(hash, "$5$") {
		t.Fatalf("finalize_rescue params %v: want a $5$ hash with hashed=true", call.Params)
	}
	if again, err := shacrypt.HashWithSalt(shacrypt.SHA256, rescuePassword, hash); err != nil || again != hash {
		t.Errorf("the hash sent does not verify the password: %v", err)
	}
	if call.Status != agentclient.StatusSucceeded {
		t.Errorf("finalize_rescue status %s", call.Status)
	}
	if r.PowerState != driver.PowerOn || r.LastError != "" {
		t.Errorf("rescued node: power %q, last error %q", r.PowerState, r.LastError)
	}
	if _, ok := r.DriverInternalInfo[driver.InternalAgentURL]; ok {
		t.Errorf("the agent URL is kept after finalize_rescue (the agent stopped serving)")
	}
	if p, _ := r.DriverInternalInfo[fake.BootPreparedKey].(string); p != "" {
		t.Errorf("boot prepared %q after the rescue, want the ramdisk's boot cleaned up", p)
	}
	noRescueSecret(t, h, r, hash)

	h.must(h.c.Unrescue(h.ctx, n.UUID))
	u := h.waitFor(n.UUID, statemachine.Active)
	if got := h.fleet.Boots(n.UUID); got != boots+1 {
		t.Errorf("ramdisk boots after unrescue = %d, want %d (the instance boots from disk)", got, boots+1)
	}
	if h.fleet.Agent(n.UUID) != nil {
		t.Errorf("an agent still runs after unrescue")
	}
	if u.PowerState != driver.PowerOn {
		t.Errorf("unrescued node power %q", u.PowerState)
	}
	if dev, _ := u.DriverInternalInfo[fake.BootDeviceKey].(string); dev != string(driver.BootDisk) {
		t.Errorf("boot device %q after unrescue, want disk", dev)
	}
	if p, _ := u.DriverInternalInfo[fake.BootPreparedKey].(string); p != "instance" {
		t.Errorf("boot prepared %q after unrescue, want instance", p)
	}
	noRescueSecret(t, h, u, hash)
}

// TestAgentRescueSHA512 hashes with Options.RescuePasswordHashAlgorithm
// sha512, and a second rescue of a rescued node boots the ramdisk again
// with a fresh hash.
func TestAgentRescueSHA512(t *testing.T) {
	t.Parallel()
	h := newAgentHarness(t, conductor.Options{RescuePasswordHashAlgorithm: conductor.RescueHashSHA512}, nil)
	n := activeAgentNode(t, h, "rescue-512")
	var hashes []string
	for range 2 {
		h.must(h.c.Rescue(h.ctx, n.UUID, rescuePassword))
		r := h.waitFor(n.UUID, statemachine.Rescue)
		hash, _ := finalizeCall(t, h.fleet.Agent(n.UUID)).Params["rescue_password"].(string)
		if again, err := shacrypt.HashWithSalt(shacrypt.SHA512, rescuePassword, hash); err != nil || again != hash || !strings.HasPrefix(hash, "$6$") {
			t.Fatalf("hash %q: want a $6$ hash of the password (%v)", hash, err)
		}
		noRescueSecret(t, h, r, hash)
		hashes = append(hashes, hash)
	}
	if hashes[0] == hashes[1] {
		t.Errorf("two rescues sent the same hash (no fresh salt)")
	}
	if _, err := conductor.New(h.store, nil, conductor.Options{RescuePasswordHashAlgorithm: "md5"}); !errors.Is(err, baremetal.ErrInvalidInput) {
		t.Errorf("conductor with rescue_password_hash_algorithm md5: %v, want ErrInvalidInput", err)
	}
}

// TestAgentRescueFinalizeFails: the agent fails finalize_rescue; the node
// is "rescue failed", powered off, with the agent's error and without
// the password; unrescue from there boots the instance again.
func TestAgentRescueFinalizeFails(t *testing.T) {
	t.Parallel()
	h := newAgentHarness(t, conductor.Options{}, func(string) *agenttest.Agent {
		a := agenttest.NewAgent(agenttest.AgentConfig{})
		a.SetBehavior(agentclient.CmdFinalizeRescue, agenttest.Behavior{Fail: &agentclient.AgentError{
			Type: "IOError", Code: 500, Message: "Rescue Operation failed when writing the hashed rescue password to the password file"}})
		return a
	})
	n := activeAgentNode(t, h, "rescue-fail")
	h.must(h.c.Rescue(h.ctx, n.UUID, rescuePassword))
	f := h.waitFor(n.UUID, statemachine.RescueFailed)
	if !strings.Contains(f.LastError, "password file") || f.PowerState != driver.PowerOff {
		t.Errorf("rescue failed: last error %q, power %q; want the agent's error, power off", f.LastError, f.PowerState)
	}
	noRescueSecret(t, h, f, "")
	h.must(h.c.Unrescue(h.ctx, n.UUID))
	u := h.waitFor(n.UUID, statemachine.Active)
	if u.PowerState != driver.PowerOn {
		t.Errorf("unrescued node power %q", u.PowerState)
	}
}

// TestAgentRescueRefused: the agent rescue interface refuses a node in
// maintenance, and a blank password is refused before the node is
// touched; neither leaves the password behind.
func TestAgentRescueRefused(t *testing.T) {
	t.Parallel()
	h := newAgentHarness(t, conductor.Options{}, nil)
	n := activeAgentNode(t, h, "rescue-refused")
	if err := h.c.Rescue(h.ctx, n.UUID, "   "); err == nil {
		t.Fatal("a blank rescue password was accepted")
	} else if strings.Contains(err.Error(), rescuePassword) {
		t.Fatalf("error shows the password: %v", err)
	}
	h.must(h.c.SetMaintenance(h.ctx, n.UUID, true, "testing"))
	if err := h.c.Rescue(h.ctx, n.UUID, rescuePassword); !errors.Is(err, conductor.ErrVerbRefused) {
		t.Fatalf("rescue in maintenance: %v, want ErrVerbRefused", err)
	} else if strings.Contains(err.Error(), rescuePassword) {
		t.Fatalf("error shows the password: %v", err)
	}
	nd, err := h.store.GetNode(h.ctx, n.UUID)
	if err != nil {
		t.Fatal(err)
	}
	if nd.ProvisionState != statemachine.Active {
		t.Errorf("state %q after refused rescues", nd.ProvisionState)
	}
	noRescueSecret(t, h, nd, "")
}

// TestAgentRescueWaitTimeout: the rescue ramdisk's agent answers busy
// to every finalize_rescue, so the node waits in "rescue wait" until the
// callback timeout, which fails it as Ironic's
// cleanup_rescuewait_timeout does: power off, the rescue's boot cleaned
// up, the password forgotten, "rescue failed" with the timeout's message.
func TestAgentRescueWaitTimeout(t *testing.T) {
	t.Parallel()
	h := newAgentHarness(t, conductor.Options{RescueCallbackTimeout: 50 * time.Millisecond, CheckProvisionStateInterval: -1},
		func(string) *agenttest.Agent {
			a := agenttest.NewAgent(agenttest.AgentConfig{})
			a.SetBehavior(agentclient.CmdFinalizeRescue, agenttest.Behavior{Busy: 1 << 20})
			return a
		})
	n := activeAgentNode(t, h, "rescue-timeout")
	h.must(h.c.Rescue(h.ctx, n.UUID, rescuePassword))
	w := h.waitFor(n.UUID, statemachine.RescueWait)
	// While the node waits, instance_info holds the password and its
	// hash; the node's views show neither.
	hash, _ := w.InstanceInfo["hashed_rescue_password"].(string)
	if w.InstanceInfo["rescue_password"] != rescuePassword || !strings.HasPrefix(hash, "$5$") {
		t.Fatalf("instance_info in rescue wait holds %d keys, want the password and its $5$ hash", len(w.InstanceInfo))
	}
	m := w.Masked()
	for _, k := range []string{"rescue_password", "hashed_rescue_password"} {
		if m.InstanceInfo[k] != baremetal.Mask {
			t.Errorf("the masked view shows instance_info %s", k)
		}
	}
	for _, view := range []string{w.String(), fmt.Sprint(m)} {
		if strings.Contains(view, rescuePassword) || strings.Contains(view, hash) {
			t.Errorf("a view of the node shows a rescue secret")
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		h.c.CheckTimeouts(h.ctx)
		nd, err := h.store.GetNode(h.ctx, n.UUID)
		if err != nil {
			t.Fatal(err)
		}
		if nd.ProvisionState == statemachine.RescueFailed && nd.Reservation == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s still %q after its rescue callback timeout", n.UUID, nd.ProvisionState)
		}
		time.Sleep(20 * time.Millisecond)
	}
	f := h.waitFor(n.UUID, statemachine.RescueFailed)
	if !strings.Contains(f.LastError, "Timeout reached while waiting for rescue ramdisk callback") || f.PowerState != driver.PowerOff {
		t.Errorf("timed-out rescue: last error %q, power %q", f.LastError, f.PowerState)
	}
	if p, _ := f.DriverInternalInfo[fake.BootPreparedKey].(string); p == "ramdisk" {
		t.Errorf("the rescue ramdisk's boot is still prepared after the timeout")
	}
	noRescueSecret(t, h, f, "")
}
