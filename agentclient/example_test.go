package agentclient_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/agentclient/agenttest"
	"github.com/anvilmetal/anvil/steps"
)

// This example runs the automated clean steps of a (fake) agent the way the
// conductor does: fetch the steps, start each one with the hardware manager
// versions, and read the outcome from the command list.
func ExampleClient() {
	srv, _ := agenttest.NewServer(agenttest.ServerConfig{})
	defer srv.Close()
	fake := agenttest.NewAgent(agenttest.AgentConfig{Token: "token-from-lookup-0123456789-abcdefghijklmno"})
	defer fake.Close()
	url, _ := srv.Register("node-1", fake)

	c, _ := agentclient.NewClient(agentclient.ClientConfig{})
	defer c.Close()
	// URL, token and certificate come from the node's driver_internal_info.
	a := agentclient.Agent{NodeUUID: "node-1", URL: url, Token: fake.Token(), VerifyCA: srv.CertPEM()}
	ctx := context.Background()

	found, err := c.GetCleanSteps(ctx, a, map[string]any{"uuid": "node-1"}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range found.Steps["GenericHardwareManager"] {
		if s.Priority == 0 {
			continue // manual only
		}
		if _, err := c.ExecuteCleanStep(ctx, a, s, nil, nil, found.HardwareManagerVersion); err != nil {
			if errors.Is(err, agentclient.ErrAgentBusy) {
				fmt.Println("busy: retry on the next heartbeat")
			}
			return
		}
		r, err := c.WaitForCommand(ctx, a, agentclient.CmdExecuteCleanStep)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s.%s (priority %d): %s\n", s.Interface, s.Name, s.Priority, r.Status)
	}
	fmt.Println("erase_devices ran", fake.StepRuns(steps.Clean, "deploy", "erase_devices"), "time(s)")
	// Output:
	// deploy.erase_devices_metadata (priority 99): SUCCEEDED
	// deploy.erase_devices (priority 10): SUCCEEDED
	// erase_devices ran 1 time(s)
}

// This example mounts the lookup and heartbeat handler over a backend and
// lets a simulated ramdisk look itself up and heartbeat once.
func ExampleNewHandler() {
	backend := agenttest.NewBackend() // the conductor implements agentclient.Backend
	defer backend.Close()
	_ = backend.AddNode(agentclient.Node{UUID: "3c2a61d5-8b61-4a7e-9d84-4a25d7a3b4c1", ProvisionState: "clean wait"}, "52:54:00:00:00:01")

	h, err := agentclient.NewHandler(backend, agentclient.HandlerConfig{})
	if err != nil {
		fmt.Println(err)
		return
	}
	api := httptest.NewServer(h)
	defer api.Close()

	rd, _ := agenttest.NewRamdisk(agenttest.RamdiskConfig{APIURL: api.URL, MACs: []string{"52:54:00:00:00:01"}})
	defer rd.Close()
	ctx := context.Background()
	if err := rd.Lookup(ctx); err != nil {
		fmt.Println(err)
		return
	}
	status, err := rd.Heartbeat(ctx)
	fmt.Println("heartbeat:", status, err)
	n, _ := backend.Node(rd.NodeUUID())
	fmt.Println("token length:", len(n.AgentToken))
	fmt.Println("agent URL recorded:", n.AgentURL == rd.URL())
	fmt.Println("certificate pinned:", n.AgentVerifyCA != "")
	// Output:
	// heartbeat: 202 <nil>
	// token length: 43
	// agent URL recorded: true
	// certificate pinned: true
}
