package clusterlab

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// MainConductor is the main function of a lab conductor process (the
// labconductor command, and examples/multiconductor re-executing itself):
// it parses args, runs RunConductor until SIGINT or SIGTERM, prints
// "READY <agent API URL>" on stdout once serving and logs JSON to stderr.
// It returns the exit code.
func MainConductor(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("labconductor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg ConductorConfig
	fs.StringVar(&cfg.DSN, "dsn", "", "PostgreSQL DSN shared by the fleet (required)")
	fs.StringVar(&cfg.Hostname, "host", "", "conductor hostname (required)")
	fs.StringVar(&cfg.AgentListen, "listen", "127.0.0.1:0", "agent API and control listen address")
	fs.StringVar(&cfg.LabURL, "lab", "", "lab base URL (required)")
	fs.StringVar(&cfg.Algorithm, "ring", "balanced", "hash ring algorithm: balanced or ironic")
	fs.DurationVar(&cfg.HeartbeatTimeout, "heartbeat-timeout", 60*time.Second, "conductor heartbeat timeout")
	fs.DurationVar(&cfg.KeepaliveInterval, "keepalive", 10*time.Second, "keepalive interval")
	fs.DurationVar(&cfg.OrphanCheckInterval, "orphan-check", 60*time.Second, "orphan check (and callback timeout check) interval")
	fs.DurationVar(&cfg.RingReset, "ring-reset", 15*time.Second, "hash ring reset interval")
	fs.DurationVar(&cfg.IntentPoll, "intent-poll", 10*time.Second, "intent poll interval")
	fs.DurationVar(&cfg.SyncPower, "sync-power", 120*time.Second, "power sync interval")
	fs.DurationVar(&cfg.PowerOffPoll, "power-off-poll", 0, "power state poll interval while an agent powers its node off (0: the conductor's 5 s)")
	fs.DurationVar(&cfg.CallbackTimeout, "callback-timeout", 1800*time.Second, "deploy/clean/rescue/service/inspect callback timeout")
	fs.IntVar(&cfg.Workers, "workers", 0, "worker pool size (0: default)")
	fs.StringVar(&cfg.PluginDir, "plugin-dir", "", "driver plugin directory holding anvil-driver-fake; the lab power then keeps its state through the plugin")
	fs.BoolVar(&cfg.IPMIConsole, "ipmi-console", false, "also enable the ipmi hardware type with the ipmitool-socat console interface (consoles run in this process)")
	rerun := fs.String("rerun-safe", "", "comma-separated out-of-band steps (interface.step) safe to re-run after a takeover")
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if cfg.DSN == "" || cfg.Hostname == "" || cfg.LabURL == "" {
		fmt.Fprintln(stderr, "labconductor: -dsn, -host and -lab are required")
		return 2
	}
	if *rerun != "" {
		cfg.RerunSafeSteps = strings.Split(*rerun, ",")
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(*level)); err != nil {
		fmt.Fprintln(stderr, "labconductor:", err)
		return 2
	}
	cfg.Logger = slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: lv})).With("conductor", cfg.Hostname)
	cfg.Ready = func(url string) { fmt.Fprintf(stdout, "READY %s\n", url) }
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := RunConductor(ctx, cfg); err != nil {
		fmt.Fprintln(stderr, "labconductor:", err)
		return 1
	}
	return 0
}
