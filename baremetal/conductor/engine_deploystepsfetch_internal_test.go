package conductor

import (
	"errors"
	"fmt"
	"testing"

	"github.com/anvilmetal/anvil/agentclient"
)

// TestDeployStepsFetchRetryable is the rule for a failed fetch of the
// agent's deploy steps at a heartbeat in wait call-back: busy and
// unreachable agents are asked again at the next heartbeat, anything else
// fails the deploy.
func TestDeployStepsFetchRetryable(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("get_deploy_steps: %w", agentclient.ErrAgentBusy), true},
		{fmt.Errorf("get_deploy_steps: %w", agentclient.ErrConnectionFailed), true},
		{fmt.Errorf("get_deploy_steps: %w", agentclient.ErrCommandFailed), false},
		{fmt.Errorf("get_deploy_steps: %w", agentclient.ErrAgentAPI), false},
		{fmt.Errorf("get_deploy_steps: %w", agentclient.ErrCommandTimeout), false},
		{errors.New("no agent client configured (AgentSettings.Client)"), false},
	} {
		if got := deployStepsFetchRetryable(tc.err); got != tc.want {
			t.Errorf("deployStepsFetchRetryable(%v) = %t, want %t", tc.err, got, tc.want)
		}
	}
}
