// Package agentclient speaks both directions of the protocol between Anvil
// and Ironic Python Agent (IPA), the ramdisk agent that runs on a node
// during inspection, cleaning, deployment, servicing and rescue. A stock
// IPA ramdisk works against it unchanged: paths, JSON shapes, status codes,
// microversions and defaults are Ironic's.
//
// # Conductor to agent: Client
//
// Client sends commands to IPA's REST API (/v1/commands, /v1/commands/{id},
// /v1/status). Commands run synchronously (wait=true: the answer is the
// finished result) or asynchronously (the answer is a RUNNING result whose
// outcome is read later from the command list). Every command Ironic sends
// has a typed method (GetCleanSteps, ExecuteCleanStep, GetDeploySteps,
// ExecuteDeployStep, GetServiceSteps, ExecuteServiceStep,
// InstallBootloader, GetPartitionUUIDs, PowerOff, Reboot, Sync,
// CollectSystemLogs, FinalizeRescue, Lockdown); Call runs any other.
//
// The agent token travels as the agent_token query parameter. TLS is
// verified against the certificate the agent sent in its heartbeat
// (Agent.VerifyCA, pinned per node), else ClientConfig.RootCAs, with TLS 1.3
// as the default minimum. Each request is bounded by command_timeout (60 s);
// a command whose request could not be delivered is retried up to
// max_command_attempts (3) times, but only after asking the agent whether
// the same command is already running, so a step is never started twice.
//
// Errors are typed: ErrAgentBusy (409 or "agent is busy": retry on the next
// heartbeat), ErrConnectionFailed (*ConnectionError), ErrAgentAPI
// (*APIError with status and fault string), ErrCommandFailed and
// ErrVersionMismatch (*CommandError with the agent's command_error), and
// ErrCommandTimeout for polled commands.
//
// # Agent to conductor: Handler
//
// Handler is the http.Handler an embedder mounts where agents are told the
// API lives (IPA's ipa-api-url). It serves version discovery, GET
// /v1/lookup and POST /v1/heartbeat/{node_ident} with every check Ironic
// makes, in Ironic's order, and talks to the rest of the system through the
// small Backend interface (find a node, get or create its token, record a
// heartbeat), which the conductor implements.
//
// Agent tokens are 32 random bytes in URL-safe base64 without padding (43
// characters). Lookup discloses a token once, when it is created; later
// lookups see "******". Heartbeats must present it; it is compared in
// constant time and never logged.
//
// # Usage
//
// Mounting the agent-facing endpoints next to the rest of an API:
//
//	h, err := agentclient.NewHandler(conductorBackend, agentclient.HandlerConfig{Logger: logger})
//	if err != nil {
//		return err
//	}
//	mux.Handle("/v1/lookup", h)
//	mux.Handle("/v1/heartbeat/", h)
//	mux.Handle("/", h) // version discovery, which IPA reads first
//
// Driving an agent from a heartbeat:
//
//	c, _ := agentclient.NewClient(agentclient.ClientConfig{})
//	a := agentclient.Agent{NodeUUID: id, URL: agentURL, Token: token, VerifyCA: pinnedPEM}
//	found, err := c.GetCleanSteps(ctx, a, maskedNode, ports)
//	switch {
//	case errors.Is(err, agentclient.ErrAgentBusy):
//		// wait for the next heartbeat
//	case err != nil:
//		return err
//	}
//	_, err = c.ExecuteCleanStep(ctx, a, step, maskedNode, ports, found.HardwareManagerVersion)
//
// Package agentclient/agenttest provides a fake IPA with real behaviour and a
// ramdisk simulator that looks itself up and heartbeats, for tests and the
// quickstart.
package agentclient
