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

// tokenKey names the one secret a console shows whose value no Spec
// can know beforehand: the agent token of the ramdisk booted now. IPA
// logs its request lines, the agent_token query parameter included, on
// the serial console. Its value runs to the next byte of tokenEnd, at
// most maxTokenValue bytes (IPA's tokens have 43).
const (
	tokenKey      = "agent_token="
	tokenEnd      = "&\"' \t\r\n;,)]}"
	maxTokenValue = 256
)

// maskTokens replaces the value of every agent_token=<value> in buf
// whose end is in buf, and returns where buf must be held from: the key
// of a value that may go on in the next piece, or a tail that may begin
// the key; len(out) when nothing is held.
func maskTokens(buf []byte) (out []byte, hold int) {
	key := []byte(tokenKey)
	if !bytes.Contains(buf, key[:1]) {
		return buf, len(buf)
	}
	i := 0
	for {
		j := bytes.Index(buf[i:], key)
		if j < 0 {
			break
		}
		j += i
		v := j + len(key)
		k := v
		for k < len(buf) && k-v < maxTokenValue && strings.IndexByte(tokenEnd, buf[k]) < 0 {
			k++
		}
		if k == len(buf) && k-v < maxTokenValue {
			out = append(out, buf[i:j]...)
			hold = len(out)
			return append(out, buf[j:]...), hold
		}
		out = append(out, buf[i:v]...)
		if k > v {
			out = append(out, redacted...)
		}
		i = k
	}
	out = append(out, buf[i:]...)
	hold = len(out)
	for n := min(len(key)-1, len(out)); n > 0; n-- {
		if bytes.HasSuffix(out, key[:n]) {
			hold = len(out) - n
			break
		}
	}
	return out, hold
}

// flush returns held bytes to emit when nothing more is coming (the hold
// timed out, the session ends): a token value left unfinished is masked.
func (sc *scrubber) flush(held []byte) []byte {
	out, hold := maskTokens(held)
	if rest := out[hold:]; bytes.HasPrefix(rest, []byte(tokenKey)) && len(rest) > len(tokenKey) {
		out = append(out[:hold+len(tokenKey)], redacted...)
	}
	return out
}

// split returns the scrubbed bytes of held+p that are safe to emit, and
// the tail to hold back.
func (sc *scrubber) split(held, p []byte) (emit, hold []byte) {
	buf := append(append([]byte(nil), held...), p...)
	for _, s := range sc.secrets {
		if bytes.Contains(buf, s) {
			buf = bytes.ReplaceAll(buf, s, []byte(redacted))
		}
	}
	buf, cut := maskTokens(buf)
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
	return string(sc.flush([]byte(s)))
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
