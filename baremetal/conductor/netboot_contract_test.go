package conductor_test

import (
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/netboot"
	"github.com/anvilmetal/anvil/netboot/stage"
)

// The conductor is the boot server's Resolver and Observer; it does not
// import package netboot itself (an embedder without network boot links
// no DHCP or TFTP code), so the contract is checked here.
var (
	_ netboot.Resolver = (*conductor.Conductor)(nil)
	_ stage.Observer   = (*conductor.Conductor)(nil)
)
