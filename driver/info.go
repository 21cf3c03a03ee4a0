package driver

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// InfoReader reads typed values out of one of a node's parameter maps
// (driver_info, instance_info, ...) on behalf of one implementation, and
// gathers what is wrong with them. Every getter returns the zero value (or
// the default it is given) when the key is absent or its value is bad, so
// a parser reads every key it needs and asks Err once at the end: the
// caller then reports every missing key together and the first invalid
// one, with the node, kind and implementation named, instead of one
// hand-made error type per driver.
//
// Values come from JSON, so a getter accepts what Ironic accepts: JSON
// numbers or decimal strings where numbers are expected (ports are sent
// both ways), Ironic's boolean words, and seconds for durations. Error
// texts name keys and what was expected, never a value, so a password
// read through the reader never reaches an error.
//
// An InfoReader is not safe for concurrent use; make one per parse.
type InfoReader struct {
	node, impl, field string
	kind              Kind
	values            map[string]any

	missing []string
	hints   map[string]string
	invalid *InvalidParameterError
}

// NewInfoReader returns a reader of values, the map named field
// ("driver_info", "instance_info", ...) of node, whose errors name kind
// and impl.
func NewInfoReader(node string, kind Kind, impl, field string, values map[string]any) *InfoReader {
	return &InfoReader{node: node, kind: kind, impl: impl, field: field, values: values}
}

// ReadDriverInfo returns a reader of t's driver_info whose errors name t's
// node and the given kind and implementation.
func ReadDriverInfo(t *Task, kind Kind, impl string) *InfoReader {
	return NewInfoReader(t.NodeUUID, kind, impl, "driver_info", t.DriverInfo)
}

// Err returns nil when every getter succeeded; otherwise a
// *MissingParameterError listing every missing key (in the order they
// were read) when any required key is absent, else an
// *InvalidParameterError naming the first bad key and what was expected.
func (r *InfoReader) Err() error {
	if len(r.missing) > 0 {
		return &MissingParameterError{Node: r.node, Kind: r.kind, Impl: r.impl, Field: r.field,
			Missing: slices.Clone(r.missing), Hints: maps.Clone(r.hints)}
	}
	if r.invalid != nil {
		e := *r.invalid
		return &e
	}
	return nil
}

// Has reports whether key is present with a non-empty value (a string of
// only spaces counts as empty).
func (r *InfoReader) Has(key string) bool {
	switch v := r.values[key].(type) {
	case nil:
		return false
	case string:
		return strings.TrimSpace(v) != ""
	default:
		return true
	}
}

// Value returns the raw value of key, for a parser that accepts more than
// one type (such as a boolean or a path); it records nothing.
func (r *InfoReader) Value(key string) any { return r.values[key] }

// Missing records key as missing. why, when not empty, says why the key is
// needed when it is not always required (such as "a user name to go with
// redfish_password"); it appears in the error after the key.
func (r *InfoReader) Missing(key, why string) {
	for _, k := range r.missing {
		if k == key {
			return
		}
	}
	r.missing = append(r.missing, key)
	if why != "" {
		if r.hints == nil {
			r.hints = make(map[string]string)
		}
		r.hints[key] = why
	}
}

// Invalid records that key's value is wrong and what was expected. Only
// the first invalid key is reported; expected must not quote the value
// when it may be a secret.
func (r *InfoReader) Invalid(key, expected string) {
	if r.invalid == nil {
		r.invalid = &InvalidParameterError{Node: r.node, Kind: r.kind, Impl: r.impl, Field: r.field, Key: key, Expected: expected}
	}
}

// absent reports whether key has no usable value, and records it as
// missing when required.
func (r *InfoReader) absent(key string, required bool) bool {
	if r.Has(key) {
		return false
	}
	if required {
		r.Missing(key, "")
	}
	return true
}

// String returns key's value with surrounding spaces trimmed. An absent
// key (or empty string) returns "" and, when required, is recorded as
// missing; any other type, a number included, is recorded as invalid (read
// ports and counts, which clients send as numbers, with Port and Int).
func (r *InfoReader) String(key string, required bool) string {
	if r.absent(key, required) {
		return ""
	}
	if v, ok := r.values[key].(string); ok {
		return strings.TrimSpace(v)
	}
	r.Invalid(key, "a string")
	return ""
}

// Int returns key's value as an int between lo and hi (inclusive). It
// accepts a whole JSON number or a decimal string; ok is false when the
// key is absent (recorded as missing when required) or invalid (recorded
// with "a whole number between lo and hi").
func (r *InfoReader) Int(key string, required bool, lo, hi int) (n int, ok bool) {
	return r.intIn(key, required, lo, hi, fmt.Sprintf("a whole number between %d and %d", lo, hi))
}

// Port returns key's value as a TCP or UDP port (1 to 65535), or 0 when
// the key is absent (recorded as missing when required) or invalid.
func (r *InfoReader) Port(key string, required bool) int {
	n, _ := r.intIn(key, required, 1, 65535, "a port number between 1 and 65535")
	return n
}

func (r *InfoReader) intIn(key string, required bool, lo, hi int, expected string) (int, bool) {
	if r.absent(key, required) {
		return 0, false
	}
	var n int64
	ok := false
	switch v := r.values[key].(type) {
	case string:
		n, ok = parseWhole(strings.TrimSpace(v))
	case json.Number:
		n, ok = parseWhole(v.String())
	default:
		n, ok = wholeNumber(v)
	}
	if !ok || n < int64(lo) || n > int64(hi) {
		r.Invalid(key, expected)
		return 0, false
	}
	return int(n), true
}

// Bool returns key's value as a boolean, or def when the key is absent.
// It accepts a JSON boolean, the numbers 0 and 1, and the words Ironic
// accepts (any case): true, t, yes, y, on, 1 and false, f, no, n, off, 0.
// Anything else is recorded as invalid and returns def.
func (r *InfoReader) Bool(key string, def bool) bool {
	if !r.Has(key) {
		return def
	}
	var b, ok bool
	switch v := r.values[key].(type) {
	case bool:
		b, ok = v, true
	case string:
		b, ok = ParseBool(v)
	case json.Number:
		b, ok = ParseBool(v.String())
	default:
		if n, whole := wholeNumber(v); whole && (n == 0 || n == 1) {
			b, ok = n == 1, true
		}
	}
	if !ok {
		r.Invalid(key, "a boolean (true or false)")
		return def
	}
	return b
}

// ParseBool parses the boolean words Ironic accepts (oslo's strict
// bool_from_string): true, t, yes, y, on, 1 and false, f, no, n, off, 0,
// in any case and with surrounding spaces; ok is false for anything else.
func ParseBool(s string) (value, ok bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "t", "yes", "y", "on", "1":
		return true, true
	case "false", "f", "no", "n", "off", "0":
		return false, true
	}
	return false, false
}

// Duration returns key's value as a non-negative duration, or def when the
// key is absent. It accepts a Go duration string ("90s", "1m30s") or a
// number of seconds, as a JSON number or a decimal string, the way Ironic
// writes timeouts.
func (r *InfoReader) Duration(key string, def time.Duration) time.Duration {
	if !r.Has(key) {
		return def
	}
	var secs float64
	ok := false
	switch v := r.values[key].(type) {
	case string:
		s := strings.TrimSpace(v)
		if d, err := time.ParseDuration(s); err == nil {
			if d >= 0 {
				return d
			}
		} else if f, err := strconv.ParseFloat(s, 64); err == nil {
			secs, ok = f, true
		}
	case json.Number:
		f, err := v.Float64()
		secs, ok = f, err == nil
	case float64:
		secs, ok = v, true
	case int:
		secs, ok = float64(v), true
	case int64:
		secs, ok = float64(v), true
	}
	if !ok || math.IsNaN(secs) || secs < 0 || secs > math.MaxInt64/float64(time.Second) {
		r.Invalid(key, "a duration such as 90s or a number of seconds")
		return def
	}
	return time.Duration(secs * float64(time.Second))
}

// OneOf returns the entry of values that key's value equals, ignoring case
// and surrounding spaces, so the caller gets its own spelling back; def
// when the key is absent. Anything else (a non-string included) is
// recorded as invalid, naming every accepted value.
func (r *InfoReader) OneOf(key, def string, values ...string) string {
	if !r.Has(key) {
		return def
	}
	s, _ := r.values[key].(string)
	for _, v := range values {
		if strings.EqualFold(strings.TrimSpace(s), v) {
			return v
		}
	}
	r.Invalid(key, "one of "+quoteList(values))
	return def
}

// wholeNumber returns v as an int64 when it is an integer or a float64
// with no fraction (JSON numbers decode as float64).
func wholeNumber(v any) (int64, bool) {
	switch x := v.(type) {
	case int:
		return int64(x), true
	case int64:
		return x, true
	case float64:
		if x == math.Trunc(x) && x >= math.MinInt64 && x < math.MaxInt64 {
			return int64(x), true
		}
	}
	return 0, false
}

func parseWhole(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}
