// Command bootstorm measures a rack powered on at once: N simulated
// machines boot from the network together, against Anvil's boot server
// (package netboot: DHCP, TFTP and HTTP in one process), then against what
// operators run today, dnsmasq (DHCP and TFTP, Debian dnsmasq-base) with
// nginx (Debian nginx-light) serving the iPXE scripts and images, in the
// same invocation.
//
// Half the machines are BIOS machines whose PXE ROM loads undionly.kpxe,
// half UEFI machines whose PXE client loads snponly.efi; each:
//
//   - runs DHCP (DISCOVER, OFFER, REQUEST, ACK) as a PXE client, from
//     0.0.0.0 with its own MAC, retransmitting at the PXE specification's
//     4, 8, 16 and 32 s;
//   - loads its network boot program over TFTP from the next server
//     (blksize 1468, tsize, a 4 s timeout and 6 tries, as EDK2 does),
//     from its leased address;
//   - runs DHCP again as iPXE (user class iPXE, option 175);
//   - fetches the iPXE script the answer names over HTTP, follows its
//     chain commands, and downloads the kernel and ramdisk it names,
//     checking their sizes.
//
// A failed TFTP or HTTP step is tried again (3 tries, a second apart)
// and counted as a retry; a machine that fails a step 3 times, or gets no
// DHCP answer after 4 tries, failed.
//
// The machines live in one network namespace and the server in another,
// joined by a veth pair; both are created by the program and deleted when
// it ends. The network is 192.0.2.0/24 for up to 200 machines, and
// 198.18.0.0/21 (RFC 2544's benchmarking range) beyond, which a /24
// cannot hold. Both servers see the same machines, files and network,
// one after the other.
//
// dnsmasq runs twice: as configured by default, and with --no-ping. By
// default it pings an address before offering it and answers the
// DISCOVER that arrives after the ping timed out, so every new machine's
// first DISCOVER goes unanswered for the PXE client's 4 s; with --no-ping
// it offers at once.
//
// It prints one JSON object per N: for each server, the time until every
// machine had its ramdisk, p50 and p99, failures by kind, retries, DHCP
// answers lost, bytes served and bytes per second, and the server's CPU
// (all its processes' user and system time over the storm) and peak RSS
// (summed over its processes); then Anvil's figures as ratios of the
// baseline's, and the machine's load before and after.
//
// Usage (as root, with ip, dnsmasq and nginx installed):
//
//	go run ./examples/bootstorm -n 100,1000 [-kernel-mib 8] [-ramdisk-mib 32] [-spread 2s]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// roleConfig is what the server and clients processes are started with.
type roleConfig struct {
	role        string
	n           int
	iface       string
	dir         string
	subnet      string
	kernelSize  int64
	ramdiskSize int64
	spread      time.Duration
	serverNS    string
}

func main() { os.Exit(run(os.Args[1:])) }

// run is the program, for the benchmark itself and for the roles it
// starts itself in (-role anvil, -role clients).
func run(args []string) int {
	fs := flag.NewFlagSet("bootstorm", flag.ContinueOnError)
	var (
		ns         = fs.String("n", "100,1000", "comma-separated machine counts, one storm each")
		kernelMiB  = fs.Int("kernel-mib", 8, "kernel size in MiB")
		ramdiskMiB = fs.Int("ramdisk-mib", 32, "ramdisk size in MiB")
		spread     = fs.Duration("spread", 2*time.Second, "machines start within this window")
		servers    = fs.String("servers", "anvil,dnsmasq,dnsmasq-noping", "servers to run, in order: anvil; dnsmasq (with nginx); dnsmasq-noping (the same with --no-ping)")
		timeout    = fs.Duration("timeout", 20*time.Minute, "bound on one storm")
		repeat     = fs.Int("repeat", 1, "run the servers this many times per N, in alternating order (A B C, C B A, ...)")
		cfg        roleConfig
	)
	fs.StringVar(&cfg.role, "role", "", "internal: anvil or clients, as the program starts itself in a namespace")
	fs.StringVar(&cfg.iface, "iface", "", "internal: interface of the role")
	fs.StringVar(&cfg.dir, "dir", "", "internal: the storm's directory")
	fs.StringVar(&cfg.subnet, "subnet", "", "internal: the network")
	fs.IntVar(&cfg.n, "count", 0, "internal: machines")
	fs.StringVar(&cfg.serverNS, "server-ns", "", "internal: the server's namespace")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg.kernelSize, cfg.ramdiskSize, cfg.spread = int64(*kernelMiB)<<20, int64(*ramdiskMiB)<<20, *spread

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch cfg.role {
	case "anvil":
		err = anvilMain(ctx, cfg)
	case "clients":
		err = clientsMain(ctx, cfg)
	case "":
		var counts []int
		for f := range strings.SplitSeq(*ns, ",") {
			n, perr := strconv.Atoi(strings.TrimSpace(f))
			if perr != nil || n < 1 || n > 2000 {
				fmt.Fprintf(os.Stderr, "bootstorm: -n: %q is not a count from 1 to 2000\n", f)
				return 2
			}
			counts = append(counts, n)
		}
		opts := benchOptions{counts: counts, kernelSize: cfg.kernelSize, ramdiskSize: cfg.ramdiskSize,
			spread: cfg.spread, servers: strings.Split(*servers, ","), timeout: *timeout, repeat: *repeat,
			log: slog.New(slog.NewTextHandler(os.Stderr, nil))}
		err = bench(ctx, opts, func(r Report) error {
			enc := json.NewEncoder(os.Stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(r)
		})
	default:
		err = fmt.Errorf("unknown -role %q", cfg.role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bootstorm:", err)
		var skip *skipError
		if errors.As(err, &skip) {
			return 3
		}
		return 1
	}
	return 0
}
