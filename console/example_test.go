//go:build linux

package console_test

import (
	"bufio"
	"context"
	"fmt"
	"log"
	"net"
	"strings"

	"github.com/anvilmetal/anvil/console"
)

// Example runs a shell loop as a node's console, types a line on the raw
// TCP console as an operator's telnet would, and reads the transcript
// after stopping it.
func Example() {
	m := console.NewManager(console.Options{})
	defer m.Close()
	ctx := context.Background()

	const node = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"
	info, err := m.Start(ctx, console.Spec{
		NodeUUID: node,
		Command: console.Command{
			Path: "/bin/sh",
			Args: []string{"-c", `stty -echo; echo machine up; while read line; do echo "got $line"; done`},
		},
		Ready: "machine up",
	})
	if err != nil {
		log.Fatal(err)
	}

	conn, err := net.Dial("tcp", info.Addr)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprint(conn, "hello\n")
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(strings.TrimSpace(line))

	if err := m.Stop(ctx, node); err != nil {
		log.Fatal(err)
	}
	chunks, err := m.Transcript(node)
	if err != nil {
		log.Fatal(err)
	}
	for _, c := range chunks {
		if c.Input {
			fmt.Printf("typed %q\n", c.Data)
		}
	}
	// Output:
	// got hello
	// typed "hello\n"
}
