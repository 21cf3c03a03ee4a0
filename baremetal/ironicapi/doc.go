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
// # Chassis and volumes
//
// Chassis (/v1/chassis, every version) group nodes: a node names its
// chassis in chassis_uuid (an unknown one is a 400, removing it needs
// 1.25), /v1/chassis/{uuid}/nodes lists them with the node listing's
// filters, and a chassis with nodes cannot be deleted (ChassisNotEmpty,
// 400). Volume connectors and targets (/v1/volume and
// /v1/nodes/{node}/volume, 1.32) are created as Ironic's API creates
// them; updates and deletions go through the conductor, under the node's
// lock, with Ironic master's rules: an update needs the node powered
// off, a deletion too unless the node is in enroll, manageable or adopt
// failed (400 InvalidStateRequested otherwise). A connector's type and
// connector_id are unique across the store, a target's boot_index per
// node (409). The node's storage interface is noop; cinder, which needs
// OpenStack's Block Storage service, is refused with that reason.
//
// Two of Ironic master's quirks are kept because clients may rely on
// them: a chassis' "nodes" is a list holding the list of links (master
// builds it with a trailing comma that makes a tuple, and its response
// schema documents the nesting), and a resource's updated_at is null
// until its first update.
//
// # Deliberate differences from Ironic
//
//	| what | Ironic | Anvil | why |
//	| --- | --- | --- | --- |
//	| "next" of /v1/chassis/{uuid}/nodes and of /v1/nodes/{node}/volume/{connectors,targets} | /v1/nodes, /v1/volume/{connectors,targets}: the chassis or node filter is lost on the next page | the same listing, filter kept | Ironic's link lists other nodes' resources on page 2 |
//	| a connector type over 32 characters, connector_id over 255, volume_type over 64, volume_id over 36, a boot_index outside 32 bits | a database error (500) | 400 naming the field and its bound | bad input gets a typed error; the bounds are Ironic's column widths |
//	| POST, PATCH or DELETE of a connector or target under /v1/nodes/{node}/volume | the body and node are checked before the malformed-URI 400 | the malformed-URI 400 at once | the request is refused either way |
//	| the cinder storage interface | available | refused with its reason | Anvil has no Block Storage client |
//	| volume listings of a project-scoped user | filtered by the node's owner or lessee | not filtered | Anvil has no policy engine yet (noauth and http_basic are admin) |
//	| deleting a volume connector or target of a powered-on node in enroll, manageable or adopt failed | allowed (master, since 2025) | allowed | master wins; Debian 12's ironic-tempest-plugin 2.5.0 predates it and expects a 400 there (test_delete_volume_*_error) |
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
