package console

import (
	"bytes"
	"log/slog"
	"strings"
)

// redacted replaces every secret Anvil finds in output, input, logs and
// errors.
const redacted = "***"

// scrubber removes Spec.Secrets from byte streams and strings. A stream
// is scrubbed across the pieces it arrives in: a tail that may be the
// beginning of a secret is held back until the next piece shows whether
// it is.
type scrubber struct {
	secrets [][]byte
}

func newScrubber(secrets []string) *scrubber {
	sc := &scrubber{}
	for _, s := range secrets {
		if s != "" {
			sc.secrets = append(sc.secrets, []byte(s))
		}
	}
	return sc
}

// split returns the scrubbed bytes of held+p that are safe to emit, and
// the tail to hold back.
func (sc *scrubber) split(held, p []byte) (emit, hold []byte) {
	buf := append(append([]byte(nil), held...), p...)
	if len(sc.secrets) == 0 {
		return buf, nil
	}
	for _, s := range sc.secrets {
		if bytes.Contains(buf, s) {
			buf = bytes.ReplaceAll(buf, s, []byte(redacted))
		}
	}
	cut := len(buf)
	for _, s := range sc.secrets {
		// The longest proper prefix of s that buf ends with.
		for k := min(len(s)-1, len(buf)); k > 0; k-- {
			if bytes.HasSuffix(buf, s[:k]) {
				cut = min(cut, len(buf)-k)
				break
			}
		}
	}
	if cut == len(buf) {
		return buf, nil
	}
	return buf[:cut], append([]byte(nil), buf[cut:]...)
}

// string scrubs a whole string (an error, a log value).
func (sc *scrubber) string(s string) string {
	for _, sec := range sc.secrets {
		s = strings.ReplaceAll(s, string(sec), redacted)
	}
	return s
}

// loggerScrub logs with every string and error value scrubbed.
type loggerScrub struct {
	l  *slog.Logger
	sc *scrubber
}

func (l *loggerScrub) clean(args []any) []any {
	out := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case error:
			out[i] = l.sc.string(v.Error())
		case string:
			out[i] = l.sc.string(v)
		default:
			out[i] = a
		}
	}
	return out
}

func (l *loggerScrub) debug(msg string, args ...any) { l.l.Debug(msg, l.clean(args)...) }
func (l *loggerScrub) info(msg string, args ...any)  { l.l.Info(msg, l.clean(args)...) }
func (l *loggerScrub) warn(msg string, args ...any)  { l.l.Warn(msg, l.clean(args)...) }
