// Package rfdriver is the Redfish client layer of the redfish hardware
// type: driver_info parsing as Ironic names it, and the operations the
// redfish interfaces need (power, boot override, secure boot, indicator,
// virtual media, inspection, BIOS, RAID volumes and firmware updates),
// built on github.com/stmcginnis/gofish.
//
// It handles what users of BMC libraries keep running into:
//
//   - One Redfish session per BMC and credentials, shared by all nodes on
//     it through a Pool, reused across calls and logged out by Pool.Close
//     (BMCs have few session slots).
//   - A 401 on a session token triggers one transparent re-login; several
//     callers hitting the same expired session log in once.
//   - A per-BMC concurrency limit (Options.MaxConcurrentPerBMC) and
//     exponential backoff with jitter on 5xx answers and connection errors
//     (honouring Retry-After), so a power sync cannot flood a BMC.
//   - Tolerant decoding: the ComputerSystem and inventory resources are read
//     as generic JSON with typed getters, so a malformed vendor field
//     degrades one property (reported in Inventory.Warnings) instead of
//     failing the whole call.
//   - A per-request timeout (Options.CallTimeout) inside the caller's
//     context; gofish's own client binds a context at connect time, so
//     this package gives gofish a per-call common.Client instead.
//
// Passwords never appear in errors or logs: InfoError names fields, not
// values; Info.String hides the password; addresses with credentials in
// the URL are refused.
//
// # Usage
//
//	info, err := rfdriver.ParseInfo(node.DriverInfo)
//	if err != nil { ... } // *InfoError, errors.Is(err, ErrInvalidInfo)
//	pool := rfdriver.NewPool(rfdriver.Options{})
//	defer pool.Close(context.Background())
//	conn, err := pool.Conn(info)
//	sys, err := conn.System(ctx)
//	state, err := sys.PowerState()        // "On" or "Off"
//	used, err := sys.Reset("On", "ForceOn") // first one the BMC advertises
package rfdriver
