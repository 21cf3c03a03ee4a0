// Command anvil-metal3 is the entrypoint of the anvild container image
// that replaces Metal3's Ironic: it renders anvild's configuration from
// the environment Metal3 gives its Ironic container (package metal3),
// writes it to $ANVIL_CONFIG (default /run/anvil/anvild.conf) and
// replaces itself with anvild ($ANVILD, default /usr/local/bin/anvild)
// run on that file, passing its own arguments on. With --print it
// prints the configuration and exits.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/anvilmetal/anvil/deploy/metal3"
)

func main() {
	r, err := metal3.Render(metal3.OSEnv())
	if err != nil {
		fmt.Fprintln(os.Stderr, "anvil-metal3:", err)
		os.Exit(2)
	}
	for _, n := range r.Notes {
		fmt.Fprintln(os.Stderr, "anvil-metal3:", n)
	}
	if len(os.Args) > 1 && os.Args[1] == "--print" {
		fmt.Print(r.INI)
		return
	}
	path := envOr("ANVIL_CONFIG", "/run/anvil/anvild.conf")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "anvil-metal3:", err)
		os.Exit(1)
	}
	// The file may name a DSN with a password: readable by anvild's user
	// alone.
	if err := os.WriteFile(path, []byte(r.INI), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, "anvil-metal3:", err)
		os.Exit(1)
	}
	bin := envOr("ANVILD", "/usr/local/bin/anvild")
	args := append([]string{bin, "--config-file", path}, os.Args[1:]...)
	if err := syscall.Exec(bin, args, os.Environ()); err != nil {
		fmt.Fprintf(os.Stderr, "anvil-metal3: run %s: %v\n", bin, err)
		os.Exit(1)
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
