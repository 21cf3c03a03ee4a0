// Command labconductor runs one conductor of the clusterlab fleet: a
// conductor sharing a PostgreSQL database with others, whose machines and
// agents live in the lab process. The chaos test starts it; it prints
// "READY <agent API URL>" on stdout once it serves, and logs JSON to
// stderr. Run it with -h for the flags.
package main

import (
	"os"

	"github.com/anvilmetal/anvil/internal/clusterlab"
)

func main() {
	os.Exit(clusterlab.MainConductor(os.Args[1:], os.Stdout, os.Stderr))
}
