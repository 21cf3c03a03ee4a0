// Package netboot is Anvil's boot server: DHCP (authoritative, or proxyDHCP
// beside an existing server), TFTP and HTTP for network boot, serving each
// node the boot configuration its boot interface wrote, and recording
// each stage it served (package netboot/stage) so that an operator can see
// where a boot stopped. It runs in the embedding process, with no external
// daemon, and is usable without the conductor.
package netboot
