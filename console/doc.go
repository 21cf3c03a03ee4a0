// Package console runs nodes' serial consoles for the conductor: a
// console program (ipmitool's "sol activate") under a pseudo-terminal,
// kept running while the node's console is enabled, exposed as a raw TCP
// port (one client at a time, as Ironic's socat console), as a WebSocket
// an embedder mounts on its own HTTP server (one writer, any number of
// read-only viewers, guarded by expiring tokens), and as a browser page
// with xterm.js. Every session keeps a size-bounded transcript, readable
// after the fact.
//
// The package decides nothing about nodes: the console interface
// implementations (console/ipmisol) build a Spec from driver_info and
// call Start and Stop; the conductor calls them when a node's console is
// enabled, restored or disabled.
package console
