package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/baremetal/ironicapi"
	"github.com/anvilmetal/anvil/baremetal/sqlstore"
	"github.com/anvilmetal/anvil/driver/pxe"
	"github.com/anvilmetal/anvil/hashring"
	"github.com/anvilmetal/anvil/netboot"
	"github.com/anvilmetal/anvil/webui"
)

// HTTP server bounds.
const (
	readHeaderTimeout = 10 * time.Second
	// readTimeout covers the largest body, a provision request carrying
	// a config drive (96 MiB by default), on a slow link.
	readTimeout     = 5 * time.Minute
	writeTimeout    = 5 * time.Minute
	idleTimeout     = 2 * time.Minute
	maxHeaderBytes  = 64 << 10
	shutdownTimeout = 10 * time.Second
)

// storeTarget is where [database]connection points.
type storeTarget struct {
	sqlite   string // a file path or ":memory:"
	postgres string // a pgx DSN
}

// parseConnection maps [database]connection to a store. Empty means a
// SQLite file in the state directory. SQLAlchemy's URL forms are
// accepted: sqlite:///relative/path, sqlite:////absolute/path, sqlite://
// (in memory), postgresql://, postgresql+psycopg2://, postgres://, and any
// key=value pgx DSN starting with "host=" or "dbname=".
func parseConnection(conn, statePath string) (storeTarget, error) {
	bad := func(exp string) error {
		return &ConfigValueError{Source: "configuration", Section: "database", Name: "connection", Value: baremetal.MaskText(conn), Expected: exp}
	}
	switch {
	case conn == "":
		return storeTarget{sqlite: filepath.Join(statePath, "anvil.sqlite")}, nil
	case conn == "sqlite://" || conn == "sqlite:///:memory:":
		return storeTarget{sqlite: ":memory:"}, nil
	case strings.HasPrefix(conn, "sqlite:///"):
		p := strings.TrimPrefix(conn, "sqlite:///")
		if i := strings.IndexByte(p, '?'); i >= 0 {
			p = p[:i]
		}
		if p == "" {
			return storeTarget{}, bad("a SQLite file path after sqlite:///")
		}
		return storeTarget{sqlite: p}, nil
	case strings.HasPrefix(conn, "postgres://"), strings.HasPrefix(conn, "postgresql://"):
		return storeTarget{postgres: conn}, nil
	case strings.HasPrefix(conn, "postgresql+"):
		_, rest, _ := strings.Cut(conn, "://")
		return storeTarget{postgres: "postgresql://" + rest}, nil
	case strings.HasPrefix(conn, "host=") || strings.HasPrefix(conn, "dbname="):
		return storeTarget{postgres: conn}, nil
	}
	return storeTarget{}, bad("sqlite:///<path>, sqlite:// or a postgresql:// URL (MySQL is not supported)")
}

// daemon is everything serve starts, closed in reverse order.
type daemon struct {
	closers []func() error
}

func (d *daemon) onClose(f func() error) { d.closers = append(d.closers, f) }

func (d *daemon) close(log *slog.Logger) {
	for i := len(d.closers) - 1; i >= 0; i-- {
		if err := d.closers[i](); err != nil {
			log.Warn("close failed", "error", err)
		}
	}
}

// serve runs anvild until ctx ends, then shuts it down gracefully.
func serve(ctx context.Context, cfg *Config, log *slog.Logger, stdout io.Writer) (err error) {
	d := &daemon{}
	defer d.close(log)

	target, err := parseConnection(cfg.Connection, cfg.StatePath)
	if err != nil {
		return err
	}
	var (
		store    *sqlstore.Store
		notifier *sqlstore.Notifier
	)
	if target.postgres != "" {
		store, err = sqlstore.OpenPostgres(ctx, target.postgres, sqlstore.Options{MaxOpenConns: 24})
		if err != nil {
			return err
		}
		d.onClose(store.Close)
		notifier, err = sqlstore.NewNotifier(ctx, target.postgres, log)
		if err != nil {
			return err
		}
		d.onClose(notifier.Close)
		log.Info("store: PostgreSQL, shared with the other conductors")
	} else {
		if target.sqlite != ":memory:" {
			if err := os.MkdirAll(filepath.Dir(target.sqlite), 0o700); err != nil {
				return fmt.Errorf("anvild: state directory: %w", err)
			}
		}
		store, err = sqlstore.OpenSQLite(ctx, target.sqlite, sqlstore.Options{})
		if err != nil {
			return err
		}
		d.onClose(store.Close)
		log.Info("store: embedded SQLite", "path", target.sqlite)
	}

	tp, err := tracerProvider(ctx, cfg)
	if err != nil {
		return err
	}
	if tp != nil {
		d.onClose(func() error {
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
			defer cancel()
			return tp.Shutdown(sctx)
		})
		log.Info("tracing: OTLP export", "endpoint", cfg.OTLPTraces)
	}
	client, err := agentclient.NewClient(agentclient.ClientConfig{CommandTimeout: cfg.AgentCommand, MaxCommandAttempts: cfg.AgentAttempts, Logger: log,
		TracerProvider: traceProviderOrNil(tp)})
	if err != nil {
		return err
	}
	d.onClose(func() error { client.Close(); return nil })

	imageOpts, images, err := startImages(ctx, cfg, log, d)
	if err != nil {
		return err
	}
	exe, _ := os.Executable()
	drv, err := loadDrivers(ctx, cfg, driverDeps{Client: client, Log: log, Executable: exe, Getenv: os.Getenv,
		TracerProvider: tp, OTLPTraces: cfg.OTLPTraces, Images: imageOpts})
	if err != nil {
		return err
	}
	d.onClose(func() error { drv.close(); return nil })
	reg := drv.reg

	copts := cfg.Conductor
	copts.Hostname = cfg.Host
	copts.Logger = log
	copts.Agent.Client = client
	copts.TracerProvider = traceProviderOrNil(tp)
	copts.Agent.APIURL = agentAPIURL(cfg)
	if cfg.powerOffRetries > 0 || cfg.powerOffInterval > 0 {
		retries, interval := cfg.powerOffRetries, cfg.powerOffInterval
		if retries <= 0 {
			retries = 6
		}
		if interval <= 0 {
			interval = 5 * time.Second
		}
		copts.Agent.PowerOffWait = time.Duration(retries) * interval
		copts.Agent.PowerOffPollInterval = interval
	}
	if cfg.LockAttempts > 0 || cfg.LockInterval > 0 {
		copts.LockPolicy = &baremetal.LockPolicy{Attempts: cfg.LockAttempts, Interval: cfg.LockInterval}
	}
	if notifier != nil {
		algo := hashring.Balanced
		if cfg.Ring == "ironic" {
			algo = hashring.IronicCompatible
		}
		copts.Cluster = &conductor.ClusterOptions{
			Ring:     conductor.RingOptions{Ring: hashring.Config{Algorithm: algo}, ResetInterval: cfg.RingReset, HeartbeatTimeout: cfg.HeartbeatTimeout},
			Notifier: notifier,
		}
	}
	c, err := conductor.New(store, reg, copts)
	if err != nil {
		return err
	}

	var boot *netboot.Server
	if cfg.Netboot {
		no := netboot.Options{HTTPBase: cfg.HTTPURL, Resolver: c, Observer: c, Logger: log, IPXEDir: cfg.IPXEDir, HTTPGRUB: cfg.HTTPGRUB}
		if cfg.TFTPServer != "" {
			no.TFTPServer = netip.MustParseAddr(cfg.TFTPServer)
		}
		if boot, err = netboot.New(no); err != nil {
			return err
		}
		if err := drv.registerNetboot(pxe.New(boot, cfg.PXE)); err != nil {
			return err
		}
	}
	if err := reg.Check(); err != nil {
		return err
	}

	agent, err := agentclient.NewHandler(c.AgentBackend(), agentclient.HandlerConfig{
		Logger:                  log,
		DisableRamdiskEndpoints: !cfg.EnableRamdiskEndpoints,
		UnrestrictedLookup:      !cfg.RestrictLookup,
		AllowInsecureCallback:   !cfg.AgentRequireTLS,
		HeartbeatTimeout:        cfg.RamdiskHeartbeatTimeout,
		PublicURL:               cfg.PublicEndpoint,
	})
	if err != nil {
		return err
	}
	var auth ironicapi.Authenticator
	if cfg.AuthStrategy == "http_basic" {
		b, err := ironicapi.LoadHTPasswd(cfg.HTPasswdFile)
		if err != nil {
			return err
		}
		auth = b
		log.Info("auth: http_basic", "user_file", cfg.HTPasswdFile, "users", b.Users())
	} else {
		log.Warn("auth: noauth; every client may use the API (set [DEFAULT]auth_strategy = http_basic)")
	}
	if cfg.MaxLimit != 1000 {
		log.Warn("[api]max_limit is fixed at 1000 in this version; the configured value is ignored", "max_limit", cfg.MaxLimit)
	}
	api, err := ironicapi.New(ironicapi.Options{
		Conductor: c, Drivers: reg, Agent: agent, Auth: auth, PublicURL: cfg.PublicEndpoint,
		MaxBodyBytes: cfg.MaxBodyBytes, MaxProvisionBodyBytes: cfg.MaxProvisionBodyBytes, Logger: log,
	})
	if err != nil {
		return err
	}

	root := http.Handler(api)
	if cfg.WebUI {
		// The web UI and the consoles' pages, behind the API's
		// authentication; the UI's actions go through the API.
		ui, err := webui.New(webui.Options{Conductor: c, Consoles: drv.console, ConsolePath: "/console", Logger: log.With("component", "webui")})
		if err != nil {
			return err
		}
		mux := http.NewServeMux()
		mux.Handle("/ui/", api.Protect(ui))
		mux.Handle("/ui", api.Protect(ui))
		mux.Handle("/console/", api.Protect(http.StripPrefix("/console/", drv.console.Handler())))
		mux.Handle("/", api)
		root = mux
	}
	if images != nil {
		inner := root
		root = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, imagesPath) {
				images.ServeHTTP(w, r)
				return
			}
			inner.ServeHTTP(w, r)
		})
	}
	if cfg.Metrics {
		mreg := prometheus.NewRegistry()
		mreg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), c.Metrics())
		for _, col := range c.ClusterCollectors() {
			mreg.MustRegister(col)
		}
		if boot != nil {
			for _, col := range boot.Collectors() {
				mreg.MustRegister(col)
			}
		}
		// /metrics sits behind the API's authentication: under
		// http_basic it needs the same credentials.
		metrics := api.Protect(promhttp.HandlerFor(mreg, promhttp.HandlerOpts{MaxRequestsInFlight: 4, Timeout: 10 * time.Second}))
		inner := root
		root = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/metrics" {
				metrics.ServeHTTP(w, r)
				return
			}
			inner.ServeHTTP(w, r)
		})
	}

	ln, err := net.Listen("tcp", net.JoinHostPort(cfg.HostIP, strconv.Itoa(cfg.Port)))
	if err != nil {
		return fmt.Errorf("anvild: [api]host_ip/port: %w", err)
	}
	scheme := "http"
	if cfg.EnableSSL {
		cert, err := tls.LoadX509KeyPair(cfg.CertFile, cfg.KeyFile)
		if err != nil {
			_ = ln.Close()
			return fmt.Errorf("anvild: [api]cert_file/key_file: %w", err)
		}
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
		scheme = "https"
	}
	srv := &http.Server{
		Handler:           root,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}

	var bootLn *netboot.Listeners
	if boot != nil {
		if bootLn, err = boot.Listen(netboot.ListenOptions{HTTPAddr: cfg.NetbootHTTP, TFTPAddr: cfg.NetbootTFTP}); err != nil {
			_ = ln.Close()
			return err
		}
	}
	var media *mediaServer
	if cfg.HTTPRootListen != "" {
		if media, err = startMediaServer(cfg.HTTPRootListen, cfg.HTTPRoot, log); err != nil {
			_ = ln.Close()
			return err
		}
		defer func() {
			mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), mediaShutdownTimeout)
			defer cancel()
			if err := media.Close(mctx); err != nil {
				log.Warn("http_root server", "error", err)
			}
		}()
		log.Info("serving http_root", "http_root", cfg.HTTPRoot, "listen", media.Addr().String(), "http_url", cfg.HTTPURL)
		fmt.Fprintf(stdout, "anvild: http_root on http://%s\n", media.Addr())
	}
	if err := c.Launch(ctx); err != nil {
		_ = ln.Close()
		return err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	bootCtx, stopBoot := context.WithCancel(context.WithoutCancel(ctx))
	bootDone := make(chan error, 1)
	if bootLn != nil {
		go func() { bootDone <- bootLn.Serve(bootCtx) }()
		attrs := []any{"http_url", cfg.HTTPURL}
		if a := bootLn.HTTPAddr(); a != nil {
			attrs = append(attrs, "http", a.String())
			fmt.Fprintf(stdout, "anvild: boot server HTTP on %s\n", a)
		}
		if a := bootLn.TFTPAddr(); a != nil {
			attrs = append(attrs, "tftp", a.String())
		}
		log.Info("boot server running", attrs...)
	} else {
		bootDone <- nil
	}
	url := scheme + "://" + ln.Addr().String()
	log.Info("anvild running", "url", url, "conductor", c.Hostname(), "hardware_types", drv.config.EnabledHardwareTypes, "version", versionString())
	fmt.Fprintf(stdout, "anvild: Ironic API on %s\n", url)
	if cfg.WebUI {
		fmt.Fprintf(stdout, "anvild: web UI on %s/ui/\n", url)
	}

	var serveErr error
	select {
	case <-ctx.Done():
		log.Info("signal received: shutting down")
	case serveErr = <-served:
		log.Error("API server stopped", "error", serveErr)
	}
	// Stop accepting requests, finish those in flight.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	if err := srv.Shutdown(sctx); err != nil {
		log.Warn("API server shutdown", "error", err)
		_ = srv.Close()
	}
	cancel()
	// Let the running operations finish, bounded, and leave the fleet.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drainBound(copts.DrainTimeout))
	derr := c.Drain(dctx)
	cancel()
	stopBoot()
	if berr := <-bootDone; berr != nil && !errors.Is(berr, context.Canceled) {
		log.Warn("boot server", "error", berr)
	}
	if derr != nil && !errors.Is(derr, conductor.ErrConductorNotRunning) {
		return errors.Join(serveErr, fmt.Errorf("anvild: drain: %w", derr))
	}
	log.Info("anvild stopped")
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	return serveErr
}

func drainBound(d time.Duration) time.Duration {
	if d <= 0 {
		return conductor.DefaultDrainTimeout
	}
	return d
}

// agentAPIURL is where agents reach this process: [api]public_endpoint,
// or the listen address when it is a specific one.
func agentAPIURL(cfg *Config) string {
	if cfg.PublicEndpoint != "" {
		return strings.TrimRight(cfg.PublicEndpoint, "/")
	}
	ip, err := netip.ParseAddr(cfg.HostIP)
	if err != nil || ip.IsUnspecified() || cfg.Port == 0 {
		return ""
	}
	scheme := "http"
	if cfg.EnableSSL {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(cfg.HostIP, strconv.Itoa(cfg.Port))
}

// tracerProvider is the OTLP-exporting TracerProvider of
// [anvil]otlp_traces_endpoint, or nil when it is empty.
func tracerProvider(ctx context.Context, cfg *Config) (*sdktrace.TracerProvider, error) {
	if cfg.OTLPTraces == "" {
		return nil, nil
	}
	exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(cfg.OTLPTraces))
	if err != nil {
		return nil, fmt.Errorf("anvild: [anvil]otlp_traces_endpoint: %w", err)
	}
	res := resource.NewSchemaless(attribute.String("service.name", "anvild"), attribute.String("host.name", cfg.Host),
		attribute.String("service.version", versionString()))
	return sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res)), nil
}

// traceProviderOrNil keeps a nil *sdktrace.TracerProvider a nil
// interface, which the options read as "no tracing".
func traceProviderOrNil(tp *sdktrace.TracerProvider) trace.TracerProvider {
	if tp == nil {
		return nil
	}
	return tp
}
