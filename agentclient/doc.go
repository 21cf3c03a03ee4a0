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
// API lives (IPA's ipa-api-url). It serves version discovery (API
// microversions 1.1 to 1.84), GET /v1/lookup, POST
// /v1/heartbeat/{node_ident} and POST /v1/continue_inspection with every
// check Ironic makes, in Ironic's order, and talks to the rest of the
// system through the small Backend interface (find a node, get or create
// its token, record a heartbeat), which the conductor implements, and the
// optional InspectionBackend (find the node being inspected, hand its data
// over).
//
// Lookup (GET /v1/lookup) checks, in order: ramdisk endpoints enabled
// (else 403); the microversion header parses and is in range (else 406) and
// is at least 1.22 (else 404; no header means 1.1); at most
// HandlerConfig.MaxLookupAddresses (1000) addresses, valid or not (else
// 400); addresses (invalid MACs are dropped, with one log line) or
// node_uuid (must be a UUID) present (else 400); a node
// matches (else 404); its provision state allows lookup, the fast-track
// list when fast track is enabled for it (else the same 404); a token
// exists or can be created without waiting for the node's lock (else 409).
// The answer is the node (uuid, properties, instance_info and
// driver_internal_info with secrets masked, links) and the config section.
//
// Heartbeat (POST /v1/heartbeat/{node_ident}) checks, in order: ramdisk
// endpoints enabled (403); microversion (406, 404 below 1.22); node_ident
// is a UUID or a node name of RFC 3986 unreserved characters, not "." or
// ".." (400, as Ironic's "Expected a logical name or UUID"); the body is
// at most 256 KiB (413) and one JSON object of known string fields (400); each field is allowed by
// the microversion: agent_version 1.36, agent_token 1.62, agent_verify_ca
// 1.68, agent_status 1.72 (400); callback_url present and an absolute
// http(s) URL, empty only with agent_status (400); agent_status is start,
// end or error (400); the node exists by UUID or name (404); a recorded
// agent_url equals callback_url (400); agent_token present (400); then the
// conductor's checks: agent_version or agent_status present (400); the
// token equals the stored one, compared in constant time (400); https
// callback unless AllowInsecureCallback (400); agent_verify_ca is a PEM
// certificate and equals the pinned one if any (400); no agent_url yet and
// the node is reserved (409). Then Backend.RecordHeartbeat and 202, without
// waiting for the heartbeat's processing.
//
// Inspection data (POST /v1/continue_inspection, Ironic's built-in in-band
// inspection) is served only when the Backend also implements
// InspectionBackend; otherwise the path answers 404 like any unknown one.
// IPA booted with ipa-inspection-callback-url posts its hardware inventory
// there before its lookup. Checks, in order: ramdisk endpoints enabled
// (403); microversion (406), at least 1.83 or exactly 1.1 (no header: the
// ironic-inspector-compatible form), else 404; the node_uuid query
// parameter only from 1.84 (else 404) and a UUID (400); the body at most
// HandlerConfig.MaxInspectionBodyBytes, 4 MiB by default (413); the body a JSON object with an
// inventory object whose interfaces are a non-empty array of objects each
// with a string mac_address, and bmc_address and bmc_v6address strings
// when present (400 naming the field, what was expected and what came;
// other keys are allowed); something to look the node up by: a valid MAC
// (invalid ones are dropped with a warning), a non-empty BMC address, or
// node_uuid (400). InspectionBackend.LookupInspectedNode finds the node,
// which must be in "inspect wait" (404 either way). From 1.84 the node's
// agent token is then ensured exactly as lookup does (created and
// disclosed once, else "******"; 409 when the node is locked), before the
// data is handed over with InspectionBackend.ContinueInspection (409 when
// locked, 404 when gone), without waiting for its processing. The 202
// answer is, from 1.84, the lookup answer (node and config with the
// token), so the ramdisk can heartbeat straight away (fast track); before,
// {"uuid": "<node uuid>"}. The handed-over InspectionData carries the
// parsed Inventory, the inventory as sent (RawInventory), every other
// top-level key as PluginData, and the handler clock's time in UTC.
// Inventory fields outside the validated ones that have an unexpected JSON
// type are tolerated, as in Ironic: they keep their zero value in
// Inventory, their value in RawInventory, and are logged.
//
// Every request body is read through a bound that grows with the bytes
// actually received: a body announced (Content-Length) over its endpoint's
// limit (256 KiB for a heartbeat, MaxInspectionBodyBytes for inspection
// data) is answered 413 before any of it is read, and a body that grows
// past the limit is cut off with the same 413. The handler cannot bound
// time: serve it with NewServer, which bounds the header, read, write and
// idle times and the header size (ServerConfig), so a client that
// trickles its request loses its connection instead of holding it.
//
// Agent tokens are 32 random bytes in URL-safe base64 without padding (43
// characters). Lookup discloses a token once, when it is created; later
// lookups see "******". Heartbeats must present it; it is compared in
// constant time and never logged.
//
// # Usage
//
// Serving the agent-facing endpoints on their own server:
//
//	h, err := agentclient.NewHandler(conductorBackend, agentclient.HandlerConfig{Logger: logger})
//	if err != nil {
//		return err
//	}
//	srv := agentclient.NewServer(h, agentclient.ServerConfig{Addr: ":6385", TLSConfig: tlsConfig})
//	go srv.ListenAndServeTLS("", "") // stop it with srv.Shutdown
//
// or next to the rest of an API on the embedder's own server (which should
// have the same bounds). Give the handler its requests without an
// http.ServeMux in front: a ServeMux cleans paths and redirects (307)
// requests such as /v1/heartbeat/. before the handler can refuse them,
// while the handler answers every path itself and never redirects:
//
//	root := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
//		if strings.HasPrefix(r.URL.Path, "/admin/") {
//			adminMux.ServeHTTP(w, r)
//			return
//		}
//		h.ServeHTTP(w, r) // version discovery, lookup, heartbeat, continue_inspection
//	})
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
