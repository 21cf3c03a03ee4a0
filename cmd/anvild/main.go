// Command anvild is Anvil as one process: a conductor on an embedded
// SQLite database (or a PostgreSQL database several anvild share), with
// OpenStack Ironic's REST API, the ramdisk agents' endpoints on the same
// listener, optional driver plugins and an optional boot server. Point
// Ironic's tools (the baremetal CLI, gophercloud, Metal3) at it:
//
//	go run ./cmd/anvild          # SQLite in ./anvil-state, noauth, 127.0.0.1:6385
//	baremetal --os-endpoint http://127.0.0.1:6385 --os-auth-type none driver list
//
// Its drivers default to Ironic's: the ipmi and redfish hardware types,
// those whose plugin (anvil-driver-ipmi, anvil-driver-redfish) is found
// beside the anvild executable or in $XDG_DATA_HOME/anvil/plugins, with
// Ironic's enabled interface lists less what Anvil lacks. With no plugin
// found it warns and enables fake-hardware alone. The library's in-process
// implementations are all registered: the agent deploy, inspect and RAID
// interfaces, the ipmitool-socat console, the fake and no-op ones, and,
// with the boot server, ipxe, pxe, http-ipxe and http.
//
// Configuration is flags and an optional INI file (--config-file) with
// Ironic's sections and option names ([DEFAULT], [api], [conductor],
// [database], [deploy], [pxe], [agent]) and Anvil's own in [anvil]; the
// flags win over the file. Options anvild does not use are logged once
// and ignored; a bad value stops it with an error naming the section and
// option. anvild --help lists the flags.
//
// It logs through slog, serves Prometheus metrics on /metrics, and on
// SIGTERM or SIGINT stops accepting requests and drains the conductor
// ([conductor]graceful_shutdown_timeout, 60 s by default) before it exits.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is anvild with args; it returns the exit code: 0 after a clean
// shutdown, 1 on a failure while running, 2 on bad configuration.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var early []func(*slog.Logger)
	cfg, err := parseConfig(args, func(fs *flag.FlagSet) { fs.SetOutput(stderr) }, func(msg string, kv ...any) {
		early = append(early, func(l *slog.Logger) { l.Warn(msg, kv...) })
	})
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if cfg.ShowVersion {
		fmt.Fprintln(stdout, versionString())
		return 0
	}
	log := newLogger(cfg, stderr)
	for _, w := range early {
		w(log)
	}
	if err := serve(ctx, cfg, log, stdout); err != nil {
		log.Error("anvild stopped", "error", err)
		var cfgErr *ConfigValueError
		if errors.As(err, &cfgErr) {
			return 2
		}
		return 1
	}
	return 0
}

func newLogger(cfg *Config, w io.Writer) *slog.Logger {
	level := slog.LevelInfo
	if cfg.Debug {
		level = slog.LevelDebug
	}
	ho := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, ho))
	}
	return slog.New(slog.NewTextHandler(w, ho))
}

// versionString is the module version and VCS revision the binary was
// built from, from its build information.
func versionString() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "anvild (no build information)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, at, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	out := fmt.Sprintf("anvild %s %s", bi.Main.Path, v)
	if rev != "" {
		out += fmt.Sprintf(" revision %s%s", rev, dirty)
		if at != "" {
			out += " (" + at + ")"
		}
	}
	return out + " " + bi.GoVersion
}
