// Package webui is a web console for operators of an Anvil conductor:
// a fleet page and a page per node, served from embedded assets (plain
// JavaScript; nothing to build) on the embedder's HTTP server, beside
// the REST API (package ironicapi) and behind the same authentication.
//
// The fleet page lists every node's provision state, power, maintenance,
// health, owning conductor, current step and last error, with filters. It
// loads one snapshot (GET {prefix}/api/fleet, read from the store a page
// at a time) and then follows the conductor's Watch over server-sent
// events (GET {prefix}/api/events): each change is a small patch of one
// row, no page polls anything, and the list draws only the rows on
// screen, so ten thousand nodes stay usable.
//
// A node's page shows its fields and ports and its history (read from the
// REST API), its provisioning timeline (GET
// {prefix}/api/nodes/{uuid}/timeline: one block per phase, with lanes for
// provision states, waits drawn as waits, network boot stages, steps and
// agent heartbeats on one time axis, failures marked; BuildTimeline), its
// serial console (package console's page, in a frame, with a token the
// UI issues) and the verbs. The UI writes nothing itself: every action is
// a request to the REST API, sent after a confirmation, which calls the
// conductor's verbs as any other client's request does.
//
// # Usage
//
//	ui, err := webui.New(webui.Options{
//		Conductor:   c,
//		Consoles:    consoles,   // optional: a *console.Manager
//		ConsolePath: "/console", // where consoles.Handler is mounted
//	})
//	mux.Handle("/ui/", ui)
//	mux.Handle("/console/", http.StripPrefix("/console/", consoles.Handler()))
//	mux.Handle("/", api) // the ironicapi.Handler, with the same Authenticator
//
// Wrap the mux in the API's authentication (cmd/anvild does): the UI's
// own endpoints check nothing themselves.
//
// The event stream carries the changes this process's conductor makes;
// with several conductors sharing PostgreSQL, a page shows the fleet as
// of its snapshot plus the changes of the conductor it is served by, and
// reloads the snapshot when it reconnects.
package webui
