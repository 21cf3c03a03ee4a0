package baremetal

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/agentclient/agenttest"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
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
	ctx := context.Background()
	client, err := agentclient.NewClient(agentclient.ClientConfig{CommandTimeout: 2 * time.Second, MaxCommandAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	reg := driver.NewRegistry(driver.Config{
		EnabledHardwareTypes: []string{driver.FakeHardware},
		EnabledInterfaces:    map[driver.Kind][]string{driver.KindDeploy: {agentdeploy.Name, driver.Fake}},
	})
	if err := reg.Register(driver.Builtins(driver.FakeConfig{})); err != nil {
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
			n := &Node{UUID: "7d3c2f4e-1b1a-4c55-9c51-8f1f0a2b3c4d", Driver: driver.FakeHardware, DeployInterface: agentdeploy.Name,
				DriverInternalInfo: map[string]any{"agent_url": tc.url, "agent_secret_token": tc.token}}
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
