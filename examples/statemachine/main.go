// Command statemachine prints Ironic's provision state machine, as Anvil
// implements it, in one of three formats: the full table as JSON, a
// Graphviz DOT graph (pipe it to `dot -Tsvg`), or a Mermaid state diagram.
//
// Usage:
//
//	go run ./examples/statemachine -format json|dot|mermaid
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/anvilmetal/anvil/statemachine"
)

// errUsage marks a bad command line; main exits with status 2 for it.
var errUsage = errors.New("usage")

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, errUsage) {
			os.Exit(2)
		}
		fmt.Fprintln(os.Stderr, "statemachine:", err)
		os.Exit(1)
	}
}

// run parses args and writes the machine to stdout in the chosen format.
func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("statemachine", flag.ContinueOnError)
	fs.SetOutput(stderr)
	format := fs.String("format", "json", "output format: json, dot or mermaid")
	if err := fs.Parse(args); err != nil {
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "statemachine: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return errUsage
	}
	m := statemachine.NewProvisionMachine()
	switch *format {
	case "json":
		return m.WriteJSON(stdout)
	case "dot":
		return m.WriteDOT(stdout)
	case "mermaid":
		return m.WriteMermaid(stdout)
	default:
		fmt.Fprintf(stderr, "statemachine: -format %q: expected json, dot or mermaid\n", *format)
		fs.Usage()
		return errUsage
	}
}
