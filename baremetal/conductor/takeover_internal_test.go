package conductor

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/agentclient/agenttest"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/driver/builtin"
	"github.com/anvilmetal/anvil/driver/fake"
	"github.com/anvilmetal/anvil/steps"
)

// TestResumableAgentGoneWaits checks the takeover rule for an in-band
// step whose agent cannot be asked for its commands: an agent that is gone
// (its URL answers 404, or nothing listens there: the ramdisk is rebooting
// or off) makes the new owner wait for the next heartbeat, as Ironic does
// for a node in a wait state; an agent that answers with another error
// (here a wrong token) still fails the node; a live agent that never
// received the step gets it again.
func TestResumableAgentGoneWaits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, srv := resumableFixture(t)
	const token = "right-token"
	live := agenttest.NewAgent(agenttest.AgentConfig{Token: token})
	t.Cleanup(live.Close)
	liveURL, err := srv.Register("live", live)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedURL := "http://" + ln.Addr().String()
	_ = ln.Close()

	step := steps.Step{Interface: "deploy", Name: "flash_firmware", Priority: 50}
	for _, tc := range []struct {
		name, url, token string
		want             resumeDecision
	}{
		{"agent URL answers 404", srv.AgentURL("rebooted"), token, resumeWait},
		{"nothing listens at the agent URL", closedURL, token, resumeWait},
		{"agent refuses the token", liveURL, "wrong-token", resumeNo},
		{"live agent never received the step", liveURL, token, resumeRerun},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &baremetal.Node{UUID: "7d3c2f4e-1b1a-4c55-9c51-8f1f0a2b3c4d", Driver: builtin.FakeHardware, DeployInterface: agentdeploy.Name,
				DriverInternalInfo: map[string]any{driver.InternalAgentURL: tc.url, driver.InternalAgentToken: tc.token}}
			got, why := c.resumable(ctx, c.newTask(n), steps.Clean, step)
			if got != tc.want {
				t.Fatalf("decision %v (%s), want %v", got, why, tc.want)
			}
			if why == "" {
				t.Errorf("decision %v without a reason", got)
			}
		})
	}
}

// TestPeerWatchSchedulesAtTheEarliestDeadline checks when the prompt
// orphan check looks at the conductors table again: at the earliest live
// peer's last keepalive + heartbeat timeout + epsilon (never later than
// one timeout), at once (gone) when a peer seen before left the list, and
// after a doubling pause when the store still lists alive a peer whose
// deadline passed on the conductor's clock.
func TestPeerWatchSchedulesAtTheEarliestDeadline(t *testing.T) {
	t.Parallel()
	const timeout = 10 * time.Second
	t0 := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	rec := func(host string, ago time.Duration) *baremetal.ConductorRecord {
		return &baremetal.ConductorRecord{Hostname: host, Online: true, UpdatedAt: t0.Add(-ago)}
	}
	type look struct {
		alive    []*baremetal.ConductorRecord
		wantWait time.Duration
		wantGone bool
	}
	for _, tc := range []struct {
		name  string
		looks []look
	}{
		{"alone: look again within one timeout", []look{
			{[]*baremetal.ConductorRecord{rec("Self", 0)}, timeout, false},
		}},
		{"earliest of two peers, self ignored whatever its case", []look{
			{[]*baremetal.ConductorRecord{rec("self", 9*time.Second), rec("p1", 2*time.Second), rec("p2", 3*time.Second)},
				timeout - 3*time.Second + orphanDeadlineEpsilon, false},
		}},
		{"peer kept alive: deadline moves on", []look{
			{[]*baremetal.ConductorRecord{rec("p1", 3*time.Second)}, 7*time.Second + orphanDeadlineEpsilon, false},
			{[]*baremetal.ConductorRecord{rec("p1", 1*time.Second)}, 9*time.Second + orphanDeadlineEpsilon, false},
		}},
		{"peer gone from the list: check now", []look{
			{[]*baremetal.ConductorRecord{rec("p1", 3*time.Second), rec("p2", 0)}, 7*time.Second + orphanDeadlineEpsilon, false},
			{[]*baremetal.ConductorRecord{rec("p2", 0)}, timeout, true},
			{[]*baremetal.ConductorRecord{rec("p2", 0)}, timeout, false},
		}},
		{"keepalive in the conductor's future: capped at one timeout", []look{
			{[]*baremetal.ConductorRecord{rec("p1", -5*time.Second)}, timeout, false},
		}},
		{"deadline passed but the store says alive: doubling pause, reset once on time", []look{
			{[]*baremetal.ConductorRecord{rec("p1", timeout+time.Second)}, orphanDeadlineEpsilon, false},
			{[]*baremetal.ConductorRecord{rec("p1", timeout+time.Second)}, 2 * orphanDeadlineEpsilon, false},
			{[]*baremetal.ConductorRecord{rec("p1", timeout+time.Second)}, 4 * orphanDeadlineEpsilon, false},
			{[]*baremetal.ConductorRecord{rec("p1", time.Second)}, 9*time.Second + orphanDeadlineEpsilon, false},
			{[]*baremetal.ConductorRecord{rec("p1", timeout+time.Second)}, orphanDeadlineEpsilon, false},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &peerWatch{self: "SELF", timeout: timeout}
			for i, l := range tc.looks {
				if got := w.observe(t0, l.alive); got != l.wantWait || w.gone != l.wantGone {
					t.Fatalf("look %d: wait %s gone %v; want %s gone %v", i, got, w.gone, l.wantWait, l.wantGone)
				}
			}
		})
	}
}

// TestResumableDeclaredAgentStep checks the takeover rule for a step the
// node's deploy interface declares but hands to the agent (the direct
// interface's write_image, not safe to re-run): the node waits for the
// next heartbeat only when the agent's last execute command is that very
// step (finished or still running); a reachable agent that never received
// it (no step, or only earlier ones) gets it again, since write_image only
// hands work to the agent; an agent that moved on to another step after
// it, or that is gone, leaves it failed; a declared step safe to re-run
// is re-run without asking the agent.
func TestResumableDeclaredAgentStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, srv := resumableFixture(t)
	const token = "right-token"
	writeImage := steps.Step{Interface: "deploy", Name: agentdeploy.StepWriteImage, Priority: 80,
		Args: map[string]any{"image_info": map[string]any{"id": "image", "urls": []any{"http://127.0.0.1:1/image"}, "checksum": "0123456789abcdef0123456789abcdef"}}}
	applyRAID := steps.Step{Interface: "raid", Name: "apply_configuration", Priority: 90,
		Args: map[string]any{"raid_config": map[string]any{"logical_disks": []any{
			map[string]any{"size_gb": "MAX", "raid_level": "1", "controller": "software"}}}}}
	// agentWith registers an agent that received sent (in order) and
	// returns its URL.
	agentWith := func(t *testing.T, name string, delay time.Duration, sent ...steps.Step) string {
		t.Helper()
		a := agenttest.NewAgent(agenttest.AgentConfig{Token: token, CommandDelay: delay})
		t.Cleanup(a.Close)
		u, err := srv.Register(name, a)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range sent {
			if _, err := c.agent.Client.ExecuteDeployStep(ctx, agentclient.Agent{URL: u, Token: token}, s, map[string]any{}, nil, a.HardwareManagerVersion()); err != nil {
				t.Fatalf("sending %s: %v", s.Key(), err)
			}
			if delay == 0 {
				<-a.CommandFinished()
			}
		}
		return u
	}
	for _, tc := range []struct {
		name string
		url  func(t *testing.T) string
		step steps.Step
		want resumeDecision
	}{
		{"agent finished the step", func(t *testing.T) string {
			return agentWith(t, "finished", 0, applyRAID, writeImage)
		}, writeImage, resumeWait},
		{"agent still runs the step", func(t *testing.T) string {
			return agentWith(t, "running", time.Hour, writeImage)
		}, writeImage, resumeWait},
		{"agent's last step is another", func(t *testing.T) string {
			return agentWith(t, "other", 0, writeImage, applyRAID)
		}, writeImage, resumeNo},
		{"agent received no step", func(t *testing.T) string {
			return agentWith(t, "none", 0)
		}, writeImage, resumeRerun},
		{"agent received only an earlier step", func(t *testing.T) string {
			return agentWith(t, "earlier", 0, applyRAID)
		}, writeImage, resumeRerun},
		{"agent URL answers 404", func(*testing.T) string { return srv.AgentURL("rebooted") }, writeImage, resumeNo},
		{"declared safe to re-run", func(*testing.T) string { return srv.AgentURL("rebooted") },
			steps.Step{Interface: "deploy", Name: agentdeploy.StepBootInstance, Priority: 20}, resumeRerun},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &baremetal.Node{UUID: "0c6f3a52-7d1e-4b8a-9f0e-2a4b6c8d0e1f", Driver: builtin.FakeHardware, DeployInterface: agentdeploy.Name,
				DriverInternalInfo: map[string]any{driver.InternalAgentURL: tc.url(t), driver.InternalAgentToken: token}}
			got, why := c.resumable(ctx, c.newTask(n), steps.Deploy, tc.step)
			if got != tc.want {
				t.Fatalf("decision %v (%s), want %v", got, why, tc.want)
			}
			if why == "" {
				t.Errorf("decision %v without a reason", got)
			}
		})
	}
}

// resumableFixture is a bare conductor that knows the fake-hardware type
// with the direct deploy interface and an agent client that tries each
// command once, and an agent server to register simulated agents on.
func resumableFixture(t *testing.T) (*Conductor, *agenttest.Server) {
	t.Helper()
	client, err := agentclient.NewClient(agentclient.ClientConfig{CommandTimeout: 2 * time.Second, MaxCommandAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	reg := driver.NewRegistry(driver.Config{
		EnabledHardwareTypes: []string{builtin.FakeHardware},
		EnabledInterfaces:    map[driver.Kind][]string{driver.KindDeploy: {agentdeploy.Name, fake.Name}},
	})
	if err := reg.Register(builtin.Bundle(fake.Config{})); err != nil {
		t.Fatal(err)
	}
	if err := reg.RegisterInterface(driver.KindDeploy, agentdeploy.Name, agentdeploy.New(client)); err != nil {
		t.Fatal(err)
	}
	c := &Conductor{drivers: reg, agent: AgentSettings{Client: client}}
	srv, err := agenttest.NewServer(agenttest.ServerConfig{Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return c, srv
}
