package plugin

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/anvilmetal/anvil/internal/jsonexact"
)

// decodeObjectFast decodes a JSON object into a map the way
// jsonexact.Decode does (numbers float64 when float64 writes them back as
// read, json.Number otherwise), without reflection. It handles the plain
// JSON task fields are made of and gives up (ok false, the caller then
// uses jsonexact.Decode) on anything else: an escape other than \" \\ \/
// \b \f \n \r \t, bytes that are not valid UTF-8, a control character,
// nesting deeper than fastMaxDepth, malformed input or data after the
// object. Decoding the task was a fifth of a plugin's CPU time per call
// through encoding/json; FuzzDecodeObjectFast checks it agrees with
// jsonexact.Decode on whatever it accepts.
func decodeObjectFast(data []byte) (map[string]any, bool) {
	d := fastDecoder{data: data}
	d.space()
	if d.i >= len(d.data) || d.data[d.i] != '{' {
		return nil, false
	}
	v, ok := d.value(0)
	if !ok {
		return nil, false
	}
	d.space()
	if d.i != len(d.data) {
		return nil, false
	}
	return v.(map[string]any), true
}

// fastMaxDepth bounds the nesting the fast path follows.
const fastMaxDepth = 64

type fastDecoder struct {
	data []byte
	i    int
}

func (d *fastDecoder) space() {
	for d.i < len(d.data) {
		switch d.data[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *fastDecoder) literal(s string, v any) (any, bool) {
	if len(d.data)-d.i < len(s) || string(d.data[d.i:d.i+len(s)]) != s {
		return nil, false
	}
	d.i += len(s)
	return v, true
}

func (d *fastDecoder) value(depth int) (any, bool) {
	if depth > fastMaxDepth {
		return nil, false
	}
	d.space()
	if d.i >= len(d.data) {
		return nil, false
	}
	switch c := d.data[d.i]; {
	case c == '{':
		d.i++
		m := map[string]any{}
		d.space()
		if d.i < len(d.data) && d.data[d.i] == '}' {
			d.i++
			return m, true
		}
		for {
			d.space()
			k, ok := d.string()
			if !ok {
				return nil, false
			}
			d.space()
			if d.i >= len(d.data) || d.data[d.i] != ':' {
				return nil, false
			}
			d.i++
			v, ok := d.value(depth + 1)
			if !ok {
				return nil, false
			}
			m[k] = v
			d.space()
			if d.i >= len(d.data) {
				return nil, false
			}
			switch d.data[d.i] {
			case ',':
				d.i++
			case '}':
				d.i++
				return m, true
			default:
				return nil, false
			}
		}
	case c == '[':
		d.i++
		s := []any{}
		d.space()
		if d.i < len(d.data) && d.data[d.i] == ']' {
			d.i++
			return s, true
		}
		for {
			v, ok := d.value(depth + 1)
			if !ok {
				return nil, false
			}
			s = append(s, v)
			d.space()
			if d.i >= len(d.data) {
				return nil, false
			}
			switch d.data[d.i] {
			case ',':
				d.i++
			case ']':
				d.i++
				return s, true
			default:
				return nil, false
			}
		}
	case c == '"':
		return d.string()
	case c == 't':
		return d.literal("true", true)
	case c == 'f':
		return d.literal("false", false)
	case c == 'n':
		return d.literal("null", nil)
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	}
	return nil, false
}

// string reads a string with no escapes but the short ones, of valid
// UTF-8 without control characters.
func (d *fastDecoder) string() (string, bool) {
	if d.i >= len(d.data) || d.data[d.i] != '"' {
		return "", false
	}
	d.i++
	start := d.i
	var buf []byte // set once an escape is met
	for d.i < len(d.data) {
		c := d.data[d.i]
		switch {
		case c == '"':
			seg := d.data[start:d.i]
			d.i++
			if !utf8.Valid(seg) {
				return "", false
			}
			if buf != nil {
				return string(append(buf, seg...)), true
			}
			return string(seg), true
		case c < 0x20:
			return "", false
		case c == '\\':
			if d.i+1 >= len(d.data) {
				return "", false
			}
			r, ok := jsonexact.SimpleEscape(d.data[d.i+1])
			if !ok {
				return "", false // \u escapes take the slow path
			}
			seg := d.data[start:d.i]
			if !utf8.Valid(seg) {
				return "", false
			}
			buf = append(append(buf, seg...), r)
			d.i += 2
			start = d.i
		default:
			d.i++
		}
	}
	return "", false
}

// number reads a JSON number and keeps it as jsonexact.Normalize does.
func (d *fastDecoder) number() (any, bool) {
	start := d.i
	if d.data[d.i] == '-' {
		d.i++
	}
	digits := func() int {
		n := 0
		for d.i < len(d.data) && d.data[d.i] >= '0' && d.data[d.i] <= '9' {
			d.i++
			n++
		}
		return n
	}
	if d.i < len(d.data) && d.data[d.i] == '0' {
		d.i++
	} else if digits() == 0 {
		return nil, false
	}
	if d.i < len(d.data) && d.data[d.i] == '.' {
		d.i++
		if digits() == 0 {
			return nil, false
		}
	}
	if d.i < len(d.data) && (d.data[d.i] == 'e' || d.data[d.i] == 'E') {
		d.i++
		if d.i < len(d.data) && (d.data[d.i] == '+' || d.data[d.i] == '-') {
			d.i++
		}
		if digits() == 0 {
			return nil, false
		}
	}
	return jsonexact.Normalize(json.Number(d.data[start:d.i])), true
}
