// Command labconductor runs one conductor of the clusterlab fleet: a
// conductor sharing a PostgreSQL database with others, whose machines and
// agents live in the lab process. The chaos test and
// examples/multiconductor start it; it prints "READY <agent API URL>" on
// stdout once it serves, and logs JSON to stderr.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/anvilmetal/anvil/internal/clusterlab"
)

func main() {
	var cfg clusterlab.ConductorConfig
	flag.StringVar(&cfg.DSN, "dsn", "", "PostgreSQL DSN shared by the fleet (required)")
	flag.StringVar(&cfg.Hostname, "host", "", "conductor hostname (required)")
	flag.StringVar(&cfg.AgentListen, "listen", "127.0.0.1:0", "agent API and control listen address")
	flag.StringVar(&cfg.LabURL, "lab", "", "lab base URL (required)")
	flag.StringVar(&cfg.Algorithm, "ring", "balanced", "hash ring algorithm: balanced or ironic")
	flag.DurationVar(&cfg.HeartbeatTimeout, "heartbeat-timeout", 60*time.Second, "conductor heartbeat timeout")
	flag.DurationVar(&cfg.KeepaliveInterval, "keepalive", 10*time.Second, "keepalive interval")
	flag.DurationVar(&cfg.OrphanCheckInterval, "orphan-check", 60*time.Second, "orphan check interval")
	flag.DurationVar(&cfg.RingReset, "ring-reset", 15*time.Second, "hash ring reset interval")
	flag.DurationVar(&cfg.IntentPoll, "intent-poll", 10*time.Second, "intent poll interval")
	flag.DurationVar(&cfg.SyncPower, "sync-power", 120*time.Second, "power sync interval")
	flag.DurationVar(&cfg.CallbackTimeout, "callback-timeout", 1800*time.Second, "deploy/clean/rescue/service/inspect callback timeout")
	flag.IntVar(&cfg.Workers, "workers", 0, "worker pool size (0: default)")
	rerun := flag.String("rerun-safe", "", "comma-separated out-of-band steps (interface.step) safe to re-run after a takeover")
	level := flag.String("log-level", "info", "log level: debug, info, warn, error")
	flag.Parse()
	if *rerun != "" {
		cfg.RerunSafeSteps = strings.Split(*rerun, ",")
	}
	if cfg.DSN == "" || cfg.Hostname == "" || cfg.LabURL == "" {
		fmt.Fprintln(os.Stderr, "labconductor: -dsn, -host and -lab are required")
		os.Exit(2)
	}
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(*level)); err != nil {
		fmt.Fprintln(os.Stderr, "labconductor:", err)
		os.Exit(2)
	}
	cfg.Logger = slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: lv})).With("conductor", cfg.Hostname)
	cfg.Ready = func(url string) { fmt.Printf("READY %s\n", url) }
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := clusterlab.RunConductor(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "labconductor:", err)
		os.Exit(1)
	}
}
