package rfdriver

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// The getters below read a decoded Redfish resource tolerantly: a field of
// the wrong type reads as absent instead of failing the whole resource,
// which is how vendor quirks (numbers as strings, null objects) degrade
// one property and no more.

func getMap(m map[string]any, key string) map[string]any {
	v, _ := m[key].(map[string]any)
	return v
}

func getString(m map[string]any, key string) string {
	switch v := m[key].(type) {
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case json.Number:
		return v.String()
	}
	return ""
}

// getNumber reads a number, accepting numeric strings ("16", "16 GB" is
// refused) as some BMCs send them.
func getNumber(m map[string]any, key string) (float64, bool) {
	switch v := m[key].(type) {
	case float64:
		return v, !math.IsNaN(v)
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		return f, err == nil
	}
	return 0, false
}

func getStrings(m map[string]any, key string) []string {
	arr, _ := m[key].([]any)
	out := make([]string, 0, len(arr))
	for _, a := range arr {
		if s, ok := a.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// link returns m[key]["@odata.id"].
func link(m map[string]any, key string) string {
	return getString(getMap(m, key), "@odata.id")
}

// links returns the @odata.id of every element of the array m[key].
func links(m map[string]any, key string) []string {
	arr, _ := m[key].([]any)
	out := make([]string, 0, len(arr))
	for _, a := range arr {
		if e, ok := a.(map[string]any); ok {
			if id := getString(e, "@odata.id"); id != "" {
				out = append(out, id)
			}
		}
	}
	return out
}

// enabled reports whether a resource's Status.State allows counting it:
// absent means yes, "Absent" or "Disabled" means no.
func enabled(m map[string]any) bool {
	switch getString(getMap(m, "Status"), "State") {
	case "Absent", "Disabled", "UnavailableOffline":
		return false
	}
	return true
}
