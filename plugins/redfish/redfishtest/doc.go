// Package redfishtest serves a stateful Redfish service for tests, built
// from the DMTF public mockups (public-rackmount1 with the Storage tree of
// public-localstorage; BSD-3-Clause, see testdata/LICENSE.md).
//
// The static mockup becomes a small BMC: ComputerSystem.Reset changes
// PowerState (and applies pending BIOS settings on the next boot), a PATCH
// of the boot override or secure boot reads back, InsertMedia and
// EjectMedia change the VirtualMedia resource, a POST to a Volumes
// collection creates a volume and DELETE removes it, SimpleUpdate starts a
// task that completes after a few polls and bumps the firmware version,
// and the SessionService issues and revokes X-Auth-Token sessions. Every
// resource except the service root needs HTTP Basic or a session token.
//
// Like sushy-tools' emulator, it can serve several systems behind one
// address (Options.Systems: copies of the mockup's system, each with its
// own id, UUID and state, and per-system counters in Stats), and model a
// BMC without a session service (Options.NoSessions: the root names none,
// a session POST answers 401 without HTTP Basic credentials and 404 with
// them). SetSystemUUID models another machine answering at the address.
//
// Tests can add latency, inject 5xx answers (FailNext), expire sessions
// (ExpireSessions), model vendor quirks (Mutate) and read counters (Stats:
// requests, peak concurrent requests, logins, logouts, resets, boots).
//
// # Usage
//
//	srv, err := redfishtest.New(redfishtest.Options{TLS: true})
//	if err != nil { ... }
//	defer srv.Close()
//	driverInfo := map[string]any{
//		"redfish_address":  srv.URL(),
//		"redfish_username": "admin",
//		"redfish_password": "password",
//	}
package redfishtest
