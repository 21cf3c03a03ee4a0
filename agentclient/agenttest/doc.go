// Package agenttest provides a faithful fake of Ironic Python Agent (IPA)
// and a ramdisk simulator, so that the conductor and its tests can drive
// simulated nodes end to end over real HTTP.
//
// Agent is an http.Handler with IPA's REST API and behaviour: commands go
// RUNNING then SUCCEEDED, FAILED or CLEAN_VERSION_MISMATCH; one command runs
// at a time and a second gets 409 "Agent is busy"; a wrong agent_token gets
// 401; an unknown extension or command id 404; a malformed body, an unknown
// command or an unusable step 400. Hardware managers (GenericHardwareManager
// by default) decide which clean, deploy and service steps exist and their
// versions; Behavior scripts delays, failures and results per command or
// per step. The agent records every command it ran (Executed, StepRuns), so
// a test can assert that a step never ran twice.
//
// Server is a loopback listener that hosts many agents, each under
// /agents/{id}, with one self-signed certificate (auto-TLS), so hundreds of
// simulated nodes cost one port. The agent URL a ramdisk reports in its
// heartbeat is the server URL plus that path, e.g.
// https://127.0.0.1:40123/agents/<node uuid>; Ironic's client, and
// agentclient.Client, append /v1/commands/ to it.
//
// Ramdisk plays IPA's boot sequence against the agent-facing API: version
// discovery, lookup with back-off (and IPA's 5/10/30 s pauses on 409),
// token adoption (a masked token without one of its own is fatal, as in
// IPA), then heartbeats every heartbeat_timeout × random(0.3, 0.6) unless an
// interval is configured, retrying after 5–10 s on errors and forcing one
// when a command finishes. It stops when the agent goes away (power_off,
// run_image, finalize_rescue, lockdown).
//
// With RamdiskConfig.Inspection set the ramdisk is an inspection ramdisk
// (IPA booted with ipa-inspection-callback-url): before its lookup it posts
// the inventory (DefaultInventory of its MACs unless given) and plugin data
// to POST /v1/continue_inspection at the server's version capped at 1.84,
// with node_uuid when it knows its node. It retries connection errors, 5xx
// and 409 with the lookup back-off within the lookup timeout, and after any
// other 4xx (Ironic's 404: not for us) or a timeout it logs and carries on
// to the lookup. A token in the 1.84 answer is adopted, so the lookup's
// masked token is accepted.
//
// Backend is an in-memory agentclient.Backend and InspectionBackend for
// tests and demos.
//
// # Usage
//
//	srv, _ := agenttest.NewServer(agenttest.ServerConfig{})
//	defer srv.Close()
//	rd, _ := agenttest.NewRamdisk(agenttest.RamdiskConfig{
//		APIURL:            apiURL, // where agentclient.Handler is mounted
//		MACs:              []string{"52:54:00:12:34:56"},
//		Server:            srv,
//		HeartbeatInterval: 100 * time.Millisecond,
//	})
//	go rd.Run(ctx)
//	// ... drive the node; then:
//	if n := rd.Agent().StepRuns(steps.Clean, "deploy", "erase_devices"); n != 1 {
//		t.Fatalf("erase_devices ran %d times", n)
//	}
package agenttest
