// Package jsonmap copies the JSON-like maps (map[string]any holding nested
// maps, []any slices and scalars) that driver_info, driver_internal_info and
// properties are made of, so that packages sharing them never alias a caller's
// nested values.
package jsonmap

// Clone deep-copies m: nested maps and slices are copied, scalars shared.
// A nil map stays nil.
func Clone(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = CloneValue(v)
	}
	return out
}

// CloneValue deep-copies one JSON-like value the way Clone copies a map.
func CloneValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return Clone(x)
	case []any:
		s := make([]any, len(x))
		for i, e := range x {
			s[i] = CloneValue(e)
		}
		return s
	case []string:
		return append([]string(nil), x...)
	default:
		return v
	}
}
