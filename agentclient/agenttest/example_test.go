package agenttest_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/agentclient/agenttest"
	"github.com/anvilmetal/anvil/steps"
)

// This example scripts a failing clean step and a slow one, and shows the
// fake agent's record of what ran.
func ExampleAgent() {
	srv, _ := agenttest.NewServer(agenttest.ServerConfig{})
	defer srv.Close()
	fake := agenttest.NewAgent(agenttest.AgentConfig{Token: "a-token-of-at-least-thirty-two-characters-x"})
	defer fake.Close()
	url, _ := srv.Register("n1", fake)
	fake.SetStepBehavior(steps.Clean, "deploy", "erase_devices_metadata", agenttest.Behavior{Delay: 50 * time.Millisecond})
	fake.SetStepBehavior(steps.Clean, "deploy", "erase_devices", agenttest.Behavior{
		Fail: &agentclient.AgentError{Type: "BlockDeviceEraseError", Code: 500, Message: "Error erasing block device", Details: "/dev/sdb: failed"},
	})

	c, _ := agentclient.NewClient(agentclient.ClientConfig{CommandWaitInterval: 10 * time.Millisecond})
	defer c.Close()
	a := agentclient.Agent{NodeUUID: "n1", URL: url, Token: fake.Token(), VerifyCA: srv.CertPEM()}
	ctx := context.Background()
	versions := fake.HardwareManagerVersion()

	_, _ = c.ExecuteCleanStep(ctx, a, steps.Step{Interface: "deploy", Name: "erase_devices_metadata"}, nil, nil, versions)
	_, err := c.ExecuteCleanStep(ctx, a, steps.Step{Interface: "deploy", Name: "erase_devices"}, nil, nil, versions)
	fmt.Println("second step while the first runs, busy:", errors.Is(err, agentclient.ErrAgentBusy))
	_, _ = c.WaitForCommand(ctx, a, agentclient.CmdExecuteCleanStep)
	_, _ = c.ExecuteCleanStep(ctx, a, steps.Step{Interface: "deploy", Name: "erase_devices"}, nil, nil, versions)
	_, err = c.WaitForCommand(ctx, a, agentclient.CmdExecuteCleanStep)
	fmt.Println("failed:", errors.Is(err, agentclient.ErrCommandFailed))
	for _, e := range fake.Executed() {
		fmt.Println(e.Command, e.Step.Name, e.Status)
	}
	// Output:
	// second step while the first runs, busy: true
	// failed: true
	// clean.execute_clean_step erase_devices_metadata SUCCEEDED
	// clean.execute_clean_step erase_devices FAILED
}
