package driver

// Keys of driver_internal_info that the conductor and the drivers (and the
// agent API handler) share, spelled as Ironic spells them so that a node
// moved between Ironic and Anvil keeps its agent. The conductor writes the
// agent keys when the ramdisk looks up and heartbeats; the agent-based
// deploy, inspect and step code reads them to reach the agent.
const (
	// InternalAgentURL is the agent's callback URL from its last
	// heartbeat; the agent is reachable while it is set.
	InternalAgentURL = "agent_url"
	// InternalAgentToken is the agent's secret token (a secret: masked in
	// every view and never logged).
	InternalAgentToken = "agent_secret_token"
	// InternalAgentTokenPregenerated is present when the token was made
	// before the ramdisk booted (and handed to it in its boot parameters),
	// so it survives the agent's reboot.
	InternalAgentTokenPregenerated = "agent_secret_token_pregenerated"
	// InternalAgentVerifyCA is the PEM certificate the agent presented for
	// auto-TLS, pinned for every later call to it.
	InternalAgentVerifyCA = "agent_verify_ca"
	// InternalAgentVersion is the agent's version from its last heartbeat.
	InternalAgentVersion = "agent_version"
	// InternalAgentLastHeartbeat is when the last heartbeat was received,
	// in UTC in agentclient.LastHeartbeatLayout.
	InternalAgentLastHeartbeat = "agent_last_heartbeat"
	// InternalAgentStatus and InternalAgentStatusMessage are what an
	// anaconda-style agent last reported ("start", "end" or "error").
	InternalAgentStatus        = "agent_status"
	InternalAgentStatusMessage = "agent_status_message"
)

// InspectionInventoryKey is where an out-of-band inspect interface leaves
// the hardware inventory it built, in IPA's inventory format (a JSON
// object: memory, cpu, disks, interfaces, system_vendor, boot), as
// Ironic's Redfish inspection builds one. The conductor takes it out of
// driver_internal_info when the inspection succeeds, runs the interface
// hooks over it (plugin data all_interfaces, valid_interfaces, macs) and
// stores both as the node's inventory (GET /v1/nodes/{node}/inventory).
const InspectionInventoryKey = "anvil_inspection_inventory"
