package plugin

import (
	"context"
	"io"
	"log"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// newSlogAdapter returns an hclog.Logger that writes to l, so that the
// host hands go-plugin the hclog logger it needs while the embedder
// configures only a *slog.Logger: plugin output re-levelled by the host
// arrives in l at the matching slog level (trace maps to debug-4), and l's
// handler decides which levels are kept.
func newSlogAdapter(l *slog.Logger) hclog.Logger {
	return &slogAdapter{l: l, level: hclog.Trace}
}

type slogAdapter struct {
	l       *slog.Logger
	name    string
	implied []any
	level   hclog.Level
}

func slogLevel(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace:
		return slog.LevelDebug - 4
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	}
	return slog.LevelInfo
}

func (a *slogAdapter) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Off || level < a.level {
		return
	}
	if level == hclog.NoLevel {
		level = hclog.Info
	}
	attrs := make([]any, 0, len(a.implied)+len(args)+2)
	if a.name != "" {
		attrs = append(attrs, "logger", a.name)
	}
	attrs = append(attrs, a.implied...)
	attrs = append(attrs, args...)
	a.l.Log(context.Background(), slogLevel(level), msg, attrs...)
}

func (a *slogAdapter) Trace(msg string, args ...any) { a.Log(hclog.Trace, msg, args...) }
func (a *slogAdapter) Debug(msg string, args ...any) { a.Log(hclog.Debug, msg, args...) }
func (a *slogAdapter) Info(msg string, args ...any)  { a.Log(hclog.Info, msg, args...) }
func (a *slogAdapter) Warn(msg string, args ...any)  { a.Log(hclog.Warn, msg, args...) }
func (a *slogAdapter) Error(msg string, args ...any) { a.Log(hclog.Error, msg, args...) }

func (a *slogAdapter) enabled(l hclog.Level) bool {
	return l >= a.level && a.l.Enabled(context.Background(), slogLevel(l))
}

func (a *slogAdapter) IsTrace() bool { return a.enabled(hclog.Trace) }
func (a *slogAdapter) IsDebug() bool { return a.enabled(hclog.Debug) }
func (a *slogAdapter) IsInfo() bool  { return a.enabled(hclog.Info) }
func (a *slogAdapter) IsWarn() bool  { return a.enabled(hclog.Warn) }
func (a *slogAdapter) IsError() bool { return a.enabled(hclog.Error) }

func (a *slogAdapter) ImpliedArgs() []any { return a.implied }

func (a *slogAdapter) With(args ...any) hclog.Logger {
	c := *a
	c.implied = append(append([]any{}, a.implied...), args...)
	return &c
}

func (a *slogAdapter) Name() string { return a.name }

func (a *slogAdapter) Named(name string) hclog.Logger {
	c := *a
	if c.name != "" {
		c.name += "." + name
	} else {
		c.name = name
	}
	return &c
}

func (a *slogAdapter) ResetNamed(name string) hclog.Logger {
	c := *a
	c.name = name
	return &c
}

// SetLevel changes the lowest level passed on. It affects this logger
// value only, not loggers derived from it earlier.
func (a *slogAdapter) SetLevel(level hclog.Level) { a.level = level }

func (a *slogAdapter) GetLevel() hclog.Level { return a.level }

func (a *slogAdapter) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(a.StandardWriter(opts), "", 0)
}

func (a *slogAdapter) StandardWriter(*hclog.StandardLoggerOptions) io.Writer {
	return writerFunc(func(b []byte) (int, error) {
		a.Info(strings.TrimRight(string(b), "\n"))
		return len(b), nil
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

var _ hclog.Logger = (*slogAdapter)(nil)

// SlogLogger returns a *slog.Logger for a plugin process's drivers that
// writes to l, the plugin's hclog logger (the one given to
// ServeConfig.Logger): their records reach the host as the plugin's own
// lines do, hclog JSON on stderr re-levelled into the host's logger at
// the matching slog level. Levels map as the host maps them back
// (below slog.LevelDebug is trace); groups become dotted key prefixes.
// Drivers that take a *slog.Logger (rfdriver.Options.Logger, say) get
// it, rather than slog.Default(), whose text lines the host cannot
// re-level and whose debug lines are dropped.
func SlogLogger(l hclog.Logger) *slog.Logger {
	return slog.New(&hclogHandler{l: l})
}

// hclogHandler is a slog.Handler writing to an hclog.Logger.
type hclogHandler struct {
	l      hclog.Logger
	attrs  []any  // from WithAttrs, flattened to key/value pairs
	prefix string // the open groups, each followed by a dot
}

// hclogLevel is the hclog level of a slog level; slogLevel's inverse.
func hclogLevel(l slog.Level) hclog.Level {
	switch {
	case l < slog.LevelDebug:
		return hclog.Trace
	case l < slog.LevelInfo:
		return hclog.Debug
	case l < slog.LevelWarn:
		return hclog.Info
	case l < slog.LevelError:
		return hclog.Warn
	}
	return hclog.Error
}

func (h *hclogHandler) Enabled(_ context.Context, l slog.Level) bool {
	switch hclogLevel(l) {
	case hclog.Trace:
		return h.l.IsTrace()
	case hclog.Debug:
		return h.l.IsDebug()
	case hclog.Info:
		return h.l.IsInfo()
	case hclog.Warn:
		return h.l.IsWarn()
	}
	return h.l.IsError()
}

func (h *hclogHandler) Handle(_ context.Context, r slog.Record) error {
	args := make([]any, len(h.attrs), len(h.attrs)+2*r.NumAttrs())
	copy(args, h.attrs)
	r.Attrs(func(a slog.Attr) bool {
		args = appendAttr(args, h.prefix, a)
		return true
	})
	h.l.Log(hclogLevel(r.Level), r.Message, args...)
	return nil
}

func (h *hclogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append([]any(nil), h.attrs...)
	for _, a := range attrs {
		c.attrs = appendAttr(c.attrs, h.prefix, a)
	}
	return &c
}

func (h *hclogHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.prefix += name + "."
	return &c
}

// appendAttr appends a as key/value pairs, its key after prefix; a
// group's members are keyed "group.member", an empty attribute is
// dropped and a group without a key inlines its members, as slog's
// handlers do.
func appendAttr(args []any, prefix string, a slog.Attr) []any {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return args
	}
	if a.Value.Kind() == slog.KindGroup {
		if a.Key != "" {
			prefix += a.Key + "."
		}
		for _, m := range a.Value.Group() {
			args = appendAttr(args, prefix, m)
		}
		return args
	}
	return append(args, prefix+a.Key, a.Value.Any())
}

var _ slog.Handler = (*hclogHandler)(nil)
