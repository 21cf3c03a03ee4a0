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
// The handler offers 1.1 to 1.115 (MinVersion, MaxVersion). A request
// names its version with "OpenStack-API-Version: baremetal 1.x" or the
// legacy "X-OpenStack-Ironic-API-Version: 1.x" ("latest" is the maximum);
// without either it is served at 1.1 with 1.1's behaviour, as Ironic
// does. A version out of range is a 406 with Ironic's message. Every
// response carries the minimum, maximum and negotiated version headers.
// Fields and endpoints newer than the request's version are hidden
// exactly where Ironic hides them. The newest five: a port's
// available_for_dynamic_portgroup and a port group's dynamic_portgroup
// (1.111); a runbook's description and traits, logical runbook names and
// /v1/runbooks/{runbook}/traits (1.112), from which a runbook runs on a
// node sharing one of its traits instead of a node having its name as a
// trait; a detailed history entry's project (1.113); a firmware
// component's vendor, model and serial_number (1.114); a detailed
// history entry's state, target_provision_state and duration_seconds
// (1.115), read a page at a time from the store.
//
// # Errors
//
// Errors have Ironic's body, {"error_message": "<JSON text of
// {faultcode, faultstring, debuginfo}>"}, and Ironic's status codes: 400
// for bad input, 404, 406 for a version or field the version lacks, 409
// for a locked node (with Retry-After) or a state that forbids the
// change, 503 for the concurrent action limits. Errors from the
// conductor, the store and drivers are mapped by their types, and worded
// as Ironic words the same condition (publicMessage: "A node with name x
// already exists.", "No valid host was found. ...", "Could not find the
// following interface in the 'ironic.hardware.interfaces.power'
// entrypoint: ..."), never with the library's wrapping or package
// prefixes; the library's own text goes to Options.Logger at info, with
// the request id. A 500 whose cause the API does not know answers
// Ironic's generic text with the request id, the detail only in the log.
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
// # Routing, VIFs, allocations
//
// A path whose first element is not a version is served as v1
// ("/nodes/x" is "/v1/nodes/x"), as Ironic's root controller does: the
// bookmark links have that form. The legacy /v1/nodes/states/console/{node}
// is served too. VIFs (/v1/nodes/{node}/vifs, 1.28) are kept in the
// ports' and port groups' internal_info.tenant_vif_port_id under the
// node's lock, the port chosen by Ironic's free-port rule. An allocation
// is created allocating and processed in the background
// (conductor.StartAllocation); its outcome lands in state and
// last_error. Protected nodes: delete, undeploy and rebuild answer 403,
// protected is set in active or rescue only (409), clearing it clears
// protected_reason; retired cannot be set in available (409).
//
// Three of Ironic master's quirks are kept because clients may rely on
// them: a chassis' "nodes" is a list holding the list of links (master
// builds it with a trailing comma that makes a tuple, and its response
// schema documents the nesting); a resource's updated_at is null until
// its first update; and before 1.26 a port group PATCH is refused (406)
// only when its first operation names mode or properties (Ironic's
// is_path_updated returns on the first operation), so a later operation
// on properties is applied although properties stays hidden below 1.26.
// Before 1.37 the traits endpoints answer as Ironic's routing does: GET
// 406, PUT 405, DELETE 404.
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
//	| VIFs on a node with the noop network interface | accepted and forgotten (NoopNetwork's vif_attach does nothing, vif_list is empty) | recorded in internal_info.tenant_vif_port_id, as Ironic's VIFPortIDMixin records them | without Neutron a client has no other place to read its VIFs back; the issue asks for it |
//	| VIFs on a node with the flat network interface | bound to the Neutron port, then recorded | recorded only | Anvil has no Neutron client |
//	| the free port a VIF goes to | ports on one of the VIF's Neutron physical networks first | port groups, then PXE-enabled ports (physical networks do not order the choice) | no Neutron network gives the VIF physical networks; the rest of Ironic's order is kept |
//	| VIFs on other network interfaces (neutron) | attached through Neutron | 400 naming the node's interface | no Neutron client |
//	| the physical network check of a port joining a port group | in the conductor, under the node's lock | in the API handler, before the port is written | the outcome and wording are Ironic's; a concurrent change of the group's other ports can slip between check and write |
//	| a detailed history entry's project (1.113) | the project of the request that caused the event | always null | Anvil's callers have no project: noauth and http_basic requests carry none, in Ironic too |
//	| a port group's dynamic_portgroup (1.111) | true for the port groups a network interface forms by itself | always false; a port's available_for_dynamic_portgroup is stored and shown but nothing reads it | Anvil forms no dynamic port groups (they come with Ironic's ironic-networking interface) |
//	| the network interface of a fake-hardware node that names none | flat, the first fake-hardware supports, when enabled | noop, which Anvil's fake-hardware lists first; flat is enabled (anvild: flat,noop, Ironic's default) and may be chosen | library callers that enable every implementation keep the noop default they had; ipmi and redfish nodes default to flat as in Ironic |
//	| faultstrings of refusals Ironic words otherwise than Anvil's typed errors | the exception's text | Ironic's wording where its exception is known (not found, duplicates, unknown driver or interface, locked, limits), else the library's text without its package prefixes | the conditions are Anvil's own checks; the table test TestPublicMessages pins each wording |
//	| test_update_portgroup_add of ironic-tempest-plugin 2.5.0 | reads properties at 1.23 | properties hidden below 1.26, as master hides them | master's hide_fields_in_newer_versions; the test fails against master too |
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
