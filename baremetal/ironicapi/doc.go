// Package ironicapi serves OpenStack Ironic's REST API v1 on top of a
// conductor, so the tools that speak it (Metal3's baremetal-operator
// through gophercloud, gophercloud itself, python-ironicclient's
// `baremetal` command, openstacksdk) work against Anvil unchanged.
//
//	h, err := ironicapi.New(ironicapi.Options{Conductor: c, Drivers: reg, Agent: agentHandler})
//	srv := &http.Server{Addr: "127.0.0.1:6385", Handler: h, ReadHeaderTimeout: 10 * time.Second}
//
// # Microversions
//
// The handler offers 1.1 to 1.110 (MinVersion, MaxVersion). A request
// names its version with "OpenStack-API-Version: baremetal 1.x" or the
// legacy "X-OpenStack-Ironic-API-Version: 1.x" ("latest" is the maximum);
// without either it is served at 1.1 with 1.1's behaviour, as Ironic
// does. A version out of range is a 406 with Ironic's message. Every
// response carries the minimum, maximum and negotiated version headers.
// Fields and endpoints newer than the request's version are hidden
// exactly where Ironic hides them.
//
// # Errors
//
// Errors have Ironic's body, {"error_message": "<JSON text of
// {faultcode, faultstring, debuginfo}>"}, and Ironic's status codes: 400
// for bad input, 404, 406 for a version or field the version lacks, 409
// for a locked node (with Retry-After) or a state that forbids the
// change, 503 for the concurrent action limits. Errors from the
// conductor, the store and drivers are mapped by their types.
//
// # Conventions inside the package
//
// Each group of endpoints lives in its own file and registers its routes
// from Handler.routes with h.handle(pattern, route{...}, fn): patterns
// are net/http.ServeMux patterns ("GET /v1/nodes/{node}/states"),
// route.minVersion is the minor version the endpoint appears in (404
// before it), route.maxBody overrides the body bound. A handlerFunc takes
// a *request (its version in rq.v, its context in rq.ctx), reads input
// with rq.decode (bounded, numbers kept exact as json.Number),
// rq.parseFields and rq.node, and answers with rq.reply(status, body) or
// rq.status(code); it returns an error to answer with Ironic's error
// body: an *Error (badRequest, notFound, notAcceptable, Errorf) or any conductor/store/driver error, which toError maps.
// Views of resources are maps built from masked copies; hideNewer and
// filterView apply version visibility and ?fields=.
//
// Authentication is Options.Auth (nil is Ironic's noauth); the root
// documents and the ramdisk endpoints (Options.Agent, token
// authenticated) are public. Secrets never leave the handler: node views
// are built from baremetal.Node.Masked, and error texts pass through
// baremetal.MaskText.
package ironicapi
