package steps

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// maxTraitLength is the longest trait name Ironic (and placement) accepts.
const maxTraitLength = 255

// ValidTraitName reports whether name can be a trait, and so a deploy
// template name: an upper-case identifier of letters, digits and
// underscores, at most 255 characters. Custom traits start with CUSTOM_
// and need a suffix. Ironic also checks standard (non-custom) names
// against the os-traits catalogue, which this package does not carry.
func ValidTraitName(name string) bool {
	if name == "" || len(name) > maxTraitLength || name[0] < 'A' || name[0] > 'Z' {
		return false
	}
	for _, r := range name {
		if !(r == '_' || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9')) {
			return false
		}
	}
	return name != "CUSTOM_"
}

// ParseTemplate decodes a deploy template as the API receives it:
// {"name": <trait>, "steps": [<deploy step>, ...]} plus the optional
// "uuid" (string) and "extra" (object), which are not kept. The name must
// be a valid trait; there must be at least one step, each with
// interface, step, args and priority as ParseUserSteps requires for
// deploy steps; an interface and step may appear only once. Every defect
// is reported in one *ParseError (Kind deploy).
func ParseTemplate(data []byte) (Template, error) {
	perr := &ParseError{Kind: Deploy}
	bad := func(index int, field, format string, a ...any) {
		perr.Problems = append(perr.Problems, ParseProblem{Index: index, Field: field, Problem: fmt.Sprintf(format, a...)})
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(data, &fields); err != nil || fields == nil {
		problem := "want a deploy template object"
		if err != nil {
			problem += ": " + describeJSONError(err)
		} else {
			problem += ", got null"
		}
		bad(-1, "", "%s", problem)
		return Template{}, perr
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch k {
		case "name", "steps", "uuid", "extra":
		default:
			bad(-1, k, "unexpected key; allowed keys are name, steps, uuid, extra")
		}
	}
	var t Template
	if v, ok := fields["name"]; !ok {
		bad(-1, "name", "is required")
	} else if err := json.Unmarshal(v, &t.Name); err != nil || isJSONNull(v) {
		bad(-1, "name", "want a string, got %s", rawTypeName(v))
	} else if !ValidTraitName(t.Name) {
		bad(-1, "name", "%q is not a valid trait name (upper-case letters, digits and underscores, e.g. CUSTOM_RAID1)", truncate(t.Name, 64))
	}
	if v, ok := fields["uuid"]; ok {
		var s string
		if err := json.Unmarshal(v, &s); err != nil || isJSONNull(v) {
			bad(-1, "uuid", "want a string, got %s", rawTypeName(v))
		}
	}
	if v, ok := fields["extra"]; ok {
		var m map[string]any
		if err := json.Unmarshal(v, &m); err != nil || m == nil {
			bad(-1, "extra", "want an object, got %s", rawTypeName(v))
		}
	}
	if v, ok := fields["steps"]; !ok {
		bad(-1, "steps", "is required")
	} else {
		var items []json.RawMessage
		if err := json.Unmarshal(v, &items); err != nil || items == nil {
			bad(-1, "steps", "want an array of deploy steps, got %s", rawTypeName(v))
		} else if len(items) == 0 {
			bad(-1, "steps", "must hold at least one step")
		} else {
			for i, raw := range items {
				s, problems := parseUserStep(Deploy, i, raw)
				perr.Problems = append(perr.Problems, problems...)
				t.Steps = append(t.Steps, s)
			}
			if dups := duplicateKeys(t.Steps); len(dups) > 0 && len(perr.Problems) == 0 {
				bad(-1, "steps", "Duplicate deploy steps. A deploy template cannot have multiple deploy steps with the same interface and step: %s", strings.Join(dups, ", "))
			}
		}
	}
	if len(perr.Problems) > 0 {
		return Template{}, perr
	}
	return t, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
