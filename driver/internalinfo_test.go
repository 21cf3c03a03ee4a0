package driver_test

import (
	"testing"

	"github.com/anvilmetal/anvil/driver"
)

// TestInternalKeysAreIronics pins the shared driver_internal_info keys to
// the names Ironic stores, so that renaming a constant cannot change what
// is written to a node.
func TestInternalKeysAreIronics(t *testing.T) {
	for got, want := range map[string]string{
		driver.InternalAgentURL:               "agent_url",
		driver.InternalAgentToken:             "agent_secret_token",
		driver.InternalAgentTokenPregenerated: "agent_secret_token_pregenerated",
		driver.InternalAgentVerifyCA:          "agent_verify_ca",
		driver.InternalAgentVersion:           "agent_version",
		driver.InternalAgentLastHeartbeat:     "agent_last_heartbeat",
		driver.InternalAgentStatus:            "agent_status",
		driver.InternalAgentStatusMessage:     "agent_status_message",
	} {
		if got != want {
			t.Errorf("constant is %q, Ironic stores %q", got, want)
		}
	}
}
