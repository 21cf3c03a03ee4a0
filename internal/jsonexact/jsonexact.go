// Package jsonexact decodes JSON without losing numbers. encoding/json
// turns every number of an interface value into a float64, so
// 9007199254740993 becomes 9007199254740992 and 1.0 becomes 1; Ironic and
// IPA, written in Python, keep both. Decode keeps a number as float64 only
// when encoding/json writes that float64 back as the very same text, and
// as json.Number otherwise, so that decoding then encoding gives the bytes
// that were read while code reading ordinary numbers as float64 keeps
// working.
package jsonexact

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strconv"
)

// errTrailing reports data after the top-level value.
var errTrailing = errors.New("jsonexact: invalid character after top-level value")

// Unmarshal decodes one JSON value into v like json.Unmarshal, with the
// numbers of interface values kept as json.Number.
func Unmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return errTrailing
	}
	return nil
}

// Decode decodes one JSON value into v like json.Unmarshal and then
// applies Normalize: numbers float64 represents exactly (in the text
// encoding/json writes for it) are float64, the others json.Number.
func Decode(data []byte, v any) error {
	if err := Unmarshal(data, v); err != nil {
		return err
	}
	switch t := v.(type) {
	case *any:
		*t = Normalize(*t)
	case *map[string]any:
		Normalize(*t)
	case *[]any:
		Normalize(*t)
	}
	return nil
}

// Normalize turns, in place, every json.Number of a decoded value (maps
// and slices included) that float64 holds exactly into float64, and
// returns the value.
func Normalize(v any) any {
	switch t := v.(type) {
	case json.Number:
		if f, ok := exactFloat(string(t)); ok {
			return f
		}
		return t
	case map[string]any:
		for k, e := range t {
			t[k] = Normalize(e)
		}
	case []any:
		for i, e := range t {
			t[i] = Normalize(e)
		}
	}
	return v
}

// exactFloat parses s and reports whether encoding/json writes the result
// back as s.
func exactFloat(s string) (float64, bool) {
	if isShortInt(s) {
		// At most 15 digits: float64 holds it and writes it back as is
		// (-0 included).
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, false
		}
		if n == 0 && s[0] == '-' {
			return math.Copysign(0, -1), true
		}
		return float64(n), true
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, false
	}
	return f, formatFloat(f) == s
}

// isShortInt reports whether s is a JSON integer literal of at most 15
// digits.
func isShortInt(s string) bool {
	d := s
	if len(d) > 0 && d[0] == '-' {
		d = d[1:]
	}
	if len(d) == 0 || len(d) > 15 {
		return false
	}
	for i := 0; i < len(d); i++ {
		if d[i] < '0' || d[i] > '9' {
			return false
		}
	}
	return true
}

// formatFloat writes f the way encoding/json does.
func formatFloat(f float64) string {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b := strconv.AppendFloat(nil, f, format, -1, 64)
	if format == 'e' {
		// encoding/json writes e-07 as e-7.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return string(b)
}

// SimpleEscape is the byte a JSON string's two-character escape \c
// stands for (", \, /, b, f, n, r, t), and false for any other c (\u
// escapes are read with their four hex digits by the caller).
func SimpleEscape(c byte) (byte, bool) {
	switch c {
	case '"', '\\', '/':
		return c, true
	case 'b':
		return '\b', true
	case 'f':
		return '\f', true
	case 'n':
		return '\n', true
	case 'r':
		return '\r', true
	case 't':
		return '\t', true
	}
	return 0, false
}
