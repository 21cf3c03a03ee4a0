package plugin

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"

	"github.com/anvilmetal/anvil/driver"
)

// HostConfig configures a Host.
type HostConfig struct {
	// Dirs are the plugin directories scanned for executables named
	// anvil-driver-<name>, in order; the first file of a name wins.
	Dirs []string
	// Logger receives the host's logs and, re-levelled at the matching
	// slog level (hclog trace maps to slog.LevelDebug-4), every plugin's
	// hclog JSON output. Nil means slog.Default(), as everywhere an
	// embedder configures logging; the handler's level decides what is
	// kept.
	Logger *slog.Logger
	// Pins maps an executable's base name ("anvil-driver-acme") or its
	// absolute path to the hex SHA-256 the file must have; a plugin whose
	// file differs is refused before it runs (at discovery and at every
	// restart).
	Pins map[string]string
	// StartTimeout bounds a plugin start (default 10s).
	StartTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait between restarts of a
	// plugin that keeps failing (defaults 200ms and 30s); the first
	// restart after a crash is immediate.
	MinBackoff, MaxBackoff time.Duration
	// Now is the clock used for backoff (default time.Now).
	Now func() time.Time
	// Concurrency bounds how many plugins are started at once during
	// discovery (default 16: a start is mostly waiting for the child).
	Concurrency int
	// TracerProvider, when set, records a client span for every
	// operation sent to a plugin ("driver <interface>.<operation>").
	// Nil means none. Either way the caller's trace context crosses to
	// the plugin with the call, so a plugin that exports spans (see
	// PluginEnv) continues the caller's trace.
	TracerProvider trace.TracerProvider
	// PluginEnv is added to every plugin process's environment, e.g.
	// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://collector:4317 for Serve
	// to export the plugin's spans there.
	PluginEnv []string
}

// Host discovers, starts and supervises driver plugins and registers what
// they provide into a driver.Registry. Its zero value is not usable; build
// one with NewHost and Close it when done: Close kills every plugin
// process and waits for the host's goroutines.
type Host struct {
	cfg HostConfig
	// tracer makes the client spans of calls (no-op without
	// cfg.TracerProvider).
	tracer trace.Tracer
	// log is cfg.Logger seen through hclog, the logger go-plugin needs at
	// the plugin boundary.
	log hclog.Logger
	wg  sync.WaitGroup

	mu      sync.Mutex
	plugins map[string]*Plugin // by path
	closed  bool
}

// NewHost returns a host with cfg's defaults filled in. It starts nothing.
func NewHost(cfg HostConfig) *Host {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 10 * time.Second
	}
	if cfg.MinBackoff <= 0 {
		cfg.MinBackoff = 200 * time.Millisecond
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		cfg.MaxBackoff = max(30*time.Second, cfg.MinBackoff)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 16
	}
	return &Host{cfg: cfg, tracer: tracerOf(cfg.TracerProvider), log: newSlogAdapter(cfg.Logger), plugins: map[string]*Plugin{}}
}

// Report is the outcome of Discover: the plugins that described
// themselves, and the files that were skipped with the reason.
type Report struct {
	Plugins []*Plugin
	Skipped []*DiscoveryError
}

// Err returns the skipped files' errors joined, or nil.
func (r Report) Err() error {
	errs := make([]error, len(r.Skipped))
	for i, s := range r.Skipped {
		errs[i] = s
	}
	return errors.Join(errs...)
}

// Unavailable returns, per plugin name, the implementations ("kind/name")
// that cannot work on the plugin's host and why (a missing tool); nil when
// every implementation of every plugin is available.
func (r Report) Unavailable() map[string]map[string]string {
	var out map[string]map[string]string
	for _, p := range r.Plugins {
		if u := p.Status().Unavailable; len(u) > 0 {
			if out == nil {
				out = map[string]map[string]string{}
			}
			out[p.Name()] = u
		}
	}
	return out
}

// Discover scans the plugin directories, and for each anvil-driver-<name>
// executable checks its pinned checksum, starts it (negotiating the
// protocol version) and asks it to describe itself. A broken plugin is
// reported in Report.Skipped (which file, why) and never stops the others.
// The returned error is only for the host itself (closed, ctx done).
// Plugins already discovered are not started twice.
func (h *Host) Discover(ctx context.Context) (Report, error) {
	h.mu.Lock()
	closed := h.closed
	h.mu.Unlock()
	if closed {
		return Report{}, ErrHostClosed
	}
	var rep Report
	seen := map[string]bool{}
	var paths []string
	for _, dir := range h.cfg.Dirs {
		entries, err := os.ReadDir(dir)
		if err != nil {
			rep.Skipped = append(rep.Skipped, &DiscoveryError{Path: dir, Err: err})
			continue
		}
		for _, e := range entries {
			if !strings.HasPrefix(e.Name(), ExecutablePrefix) || seen[e.Name()] {
				continue
			}
			seen[e.Name()] = true
			paths = append(paths, filepath.Join(dir, e.Name()))
		}
	}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(h.cfg.Concurrency)
	for _, path := range paths {
		g.Go(func() error {
			p, err := h.load(gctx, path)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				h.log.Warn("skipping driver plugin", "path", path, "error", err)
				rep.Skipped = append(rep.Skipped, &DiscoveryError{Path: path, Err: err})
				return nil
			}
			rep.Plugins = append(rep.Plugins, p)
			return nil
		})
	}
	_ = g.Wait()
	if err := ctx.Err(); err != nil {
		return rep, err
	}
	sort.Slice(rep.Plugins, func(i, j int) bool { return rep.Plugins[i].path < rep.Plugins[j].path })
	sort.Slice(rep.Skipped, func(i, j int) bool { return rep.Skipped[i].Path < rep.Skipped[j].Path })
	return rep, nil
}

// Load starts and describes the one plugin executable at path, as Discover
// does for each file it finds.
func (h *Host) Load(ctx context.Context, path string) (*Plugin, error) {
	p, err := h.load(ctx, path)
	if err != nil {
		return nil, &DiscoveryError{Path: path, Err: err}
	}
	return p, nil
}

func (h *Host) load(ctx context.Context, path string) (*Plugin, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, ErrHostClosed
	}
	if p, ok := h.plugins[abs]; ok {
		h.mu.Unlock()
		return p, nil
	}
	h.mu.Unlock()

	fi, err := os.Stat(abs)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return nil, fmt.Errorf("%w: not an executable regular file (mode %v)", ErrNotAPlugin, fi.Mode())
	}
	name := strings.TrimPrefix(filepath.Base(abs), ExecutablePrefix)
	var sum []byte
	if pin := h.pinFor(abs); pin != "" {
		if sum, err = hex.DecodeString(pin); err != nil || len(sum) != 32 {
			return nil, fmt.Errorf("%w: pinned sha256 %q is not 64 hex digits", driver.ErrInvalidParameter, pin)
		}
		if err := verifyChecksum(abs, sum); err != nil {
			return nil, err
		}
	}
	p := &Plugin{host: h, path: abs, sum: sum, name: name}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return nil, ErrHostClosed
	}
	h.plugins[abs] = p
	h.mu.Unlock()
	if _, _, err := p.describe(ctx); err != nil {
		h.mu.Lock()
		delete(h.plugins, abs)
		h.mu.Unlock()
		p.stop()
		return nil, h.explainStartFailure(ctx, abs, name, err)
	}
	st := p.Status()
	h.log.Info("driver plugin loaded", "plugin", p.Name(), "path", abs, "protocol", st.ProtocolVersion)
	for _, impl := range slices.Sorted(maps.Keys(st.Unavailable)) {
		h.log.Warn("driver plugin implementation unavailable on this host", "plugin", p.Name(), "implementation", impl, "reason", st.Unavailable[impl])
	}
	return p, nil
}

// explainStartFailure turns a failed first start into the most useful
// error. The common path starts a plugin directly; only when that fails is
// the executable probed for its protocol versions, so that a version
// mismatch is reported with both version lists (go-plugin only says that
// they differ) and a file that is not a plugin says so.
func (h *Host) explainStartFailure(ctx context.Context, abs, name string, startErr error) error {
	versions, probedName, err := probeVersions(ctx, abs)
	if err != nil {
		return errors.Join(startErr, err)
	}
	if probedName != "" {
		name = probedName
	}
	if len(intersect(HostProtocolVersions(), versions)) == 0 {
		return &ProtocolVersionError{Plugin: name, Path: abs, HostVersions: HostProtocolVersions(), PluginVersions: versions}
	}
	return startErr
}

func (h *Host) pinFor(abs string) string {
	if pin, ok := h.cfg.Pins[abs]; ok {
		return pin
	}
	return h.cfg.Pins[filepath.Base(abs)]
}

// Plugins returns the loaded plugins, sorted by path.
func (h *Host) Plugins() []*Plugin {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]*Plugin, 0, len(h.plugins))
	for _, p := range h.plugins {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *Plugin) int { return strings.Compare(a.path, b.path) })
	return out
}

// Register registers into reg the hardware types and implementations of
// every loaded plugin, as proxies indistinguishable from built-ins. Name
// clashes are reported (joined) and skip only the clashing entry.
func (h *Host) Register(reg *driver.Registry) error {
	var errs []error
	for _, p := range h.Plugins() {
		b, err := p.Bundle()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		errs = append(errs, reg.RegisterFrom("plugin "+p.Name()+" ("+p.path+")", b))
	}
	return errors.Join(errs...)
}

// Close kills every plugin process and waits for the host's goroutines. It
// is safe to call more than once.
func (h *Host) Close() error {
	h.mu.Lock()
	h.closed = true
	plugins := make([]*Plugin, 0, len(h.plugins))
	for _, p := range h.plugins {
		plugins = append(plugins, p)
	}
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range plugins {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.stop()
		}()
	}
	wg.Wait()
	h.wg.Wait()
	return nil
}
