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
//
// # Usage
//
// One Manager serves a process; Close it on the way out, and no console
// program outlives it:
//
//	m := console.NewManager(console.Options{
//		PortRange:     [2]int{10000, 20000}, // [console]port_range
//		TranscriptDir: "/var/lib/anvil/console",
//	})
//	defer m.Close()
//
// Start a node's console with the program and its secrets (passed in the
// environment, never in arguments); Start returns once the program says
// it is up and the TCP port listens:
//
//	info, err := m.Start(ctx, console.Spec{
//		NodeUUID: node.UUID,
//		Command: console.Command{
//			Path: "/usr/bin/ipmitool",
//			Args: []string{"-I", "lanplus", "-H", bmc, "-U", user, "-E", "sol", "activate"},
//			Env:  []string{"IPMI_PASSWORD=" + password},
//		},
//		Before:  &console.Command{Path: "/usr/bin/ipmitool", Args: deactivateArgs, Env: env},
//		Ready:   "[SOL Session operational",
//		Secrets: []string{password},
//	})
//	// info.URL() is "tcp://127.0.0.1:10000": Ironic's console_info.
//
// For browsers, mount the Handler and hand out links with a token:
//
//	mux.Handle("/console/", http.StripPrefix("/console/", m.Handler()))
//	tok, err := m.IssueToken(node.UUID, console.ReadWrite)
//	link := "/console/" + node.UUID + "?token=" + tok.Value
//
// In-process clients Attach: any number read-only, one read-write (the
// TCP client and a WebSocket writer count as that one). Stop ends the
// console; its transcript stays until the node's next Start.
//
// # Processes
//
// The program leads its own session and process group, with the
// pseudo-terminal as its controlling terminal, and gets SIGKILL should
// this process die (Linux's parent-death signal, set from a thread kept
// for the child's life). On Linux the program also holds the terminal's
// controlling side as file descriptor 3, so that this process's death
// does not hang the terminal up while the program is dying: the program
// then dies with its terminal intact and the kernel sends SIGHUP to its
// process group, its children included. Stopping sends SIGTERM to the group, SIGKILL
// after Options.KillTimeout, and waits until the group is gone. A program
// that exits is started again after 1 s, doubling to 30 s, with
// Spec.Before run first each time; clients stay attached across restarts.
//
// # Clients
//
// Output fans out to every client through a 256 KiB buffer each; a client
// that falls further behind is closed (ErrClientTooSlow) and the console
// goes on. A client with no byte in either direction for its idle timeout
// is closed (ErrIdleTimeout). Spec.Secrets are replaced by "***" in what
// clients see, in transcripts, logs and errors, also when a secret
// arrives split over several reads.
package console
