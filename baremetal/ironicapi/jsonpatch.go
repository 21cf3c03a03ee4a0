package ironicapi

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// patchOp is one operation of an RFC 6902 JSON patch. Ironic accepts add,
// replace and remove only.
type patchOp struct {
	Op       string
	Path     string
	Value    any
	HasValue bool
}

// maxPatchOps bounds the operations of one PATCH request.
const maxPatchOps = 1000

// pathPattern is the path Ironic's patch schema accepts before 1.98
// (word characters and dashes); from 1.98 a segment may also hold the
// RFC 6901 escapes ~0 and ~1.
var (
	pathPattern    = regexp.MustCompile(`^(/[\w-]+)+$`)
	pathPattern198 = regexp.MustCompile(`^(/([\w-]|~[01])+)+$`)
)

// decodePatch reads a JSON patch from the request body.
func (rq *request) decodePatch() ([]patchOp, error) {
	var raw []map[string]any
	if err := rq.decode(&raw); err != nil {
		return nil, err
	}
	return parsePatch(raw, rq.v.AtLeast(98))
}

// parsePatch validates decoded patch operations as Ironic's JsonPatch
// schema does.
func parsePatch(raw []map[string]any, specialChars bool) ([]patchOp, error) {
	if len(raw) == 0 {
		return nil, badRequest("Patch must contain at least one operation.")
	}
	if len(raw) > maxPatchOps {
		return nil, badRequest("Patch has %d operations; at most %d are accepted.", len(raw), maxPatchOps)
	}
	pat := pathPattern
	if specialChars {
		pat = pathPattern198
	}
	ops := make([]patchOp, 0, len(raw))
	for i, m := range raw {
		for k := range m {
			if k != "op" && k != "path" && k != "value" {
				return nil, badRequest("Patch operation %d: unexpected key %q.", i, k)
			}
		}
		op, _ := m["op"].(string)
		path, _ := m["path"].(string)
		value, has := m["value"]
		switch op {
		case "add", "replace":
			if !has {
				return nil, badRequest("Patch operation %d (%s %s): 'value' is a required property.", i, op, path)
			}
		case "remove":
			// Ironic's schema lets a remove carry a value, and ignores
			// it; gophercloud sends "value": null with every remove.
			value, has = nil, false
		default:
			return nil, badRequest("Patch operation %d: op %q is not one of 'add', 'replace', 'remove'.", i, op)
		}
		if !pat.MatchString(path) {
			return nil, badRequest("Patch operation %d: invalid path %q.", i, path)
		}
		ops = append(ops, patchOp{Op: op, Path: path, Value: value, HasValue: has})
	}
	return ops, nil
}

// rootField is the top-level attribute a patch path starts with,
// unescaped.
func (p patchOp) rootField() string {
	seg := strings.SplitN(strings.TrimPrefix(p.Path, "/"), "/", 2)[0]
	return unescapePointer(seg)
}

func unescapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
}

// applyPatch applies ops to a deep copy of doc, one at a time in order,
// as Ironic's apply_jsonpatch: an add of an attribute the resource's root
// does not have is refused up front, add on an existing object key
// replaces it, and an operation that cannot apply names itself.
func applyPatch(doc map[string]any, ops []patchOp) (map[string]any, error) {
	for _, p := range ops {
		if p.Op == "add" && strings.Count(p.Path, "/") == 1 {
			if _, ok := doc[p.rootField()]; !ok {
				return nil, badRequest("Adding a new attribute (%s) to the root of the resource is not allowed", p.Path)
			}
		}
	}
	cur := deepCopy(doc).(map[string]any)
	for _, p := range ops {
		segs := strings.Split(strings.TrimPrefix(p.Path, "/"), "/")
		for i := range segs {
			segs[i] = unescapePointer(segs[i])
		}
		next, err := applyOp(cur, segs, p)
		if err != nil {
			return nil, badRequest("Couldn't apply patch '%s'. Reason: %v", p.describe(), err)
		}
		cur = next.(map[string]any)
	}
	return cur, nil
}

func (p patchOp) describe() string {
	if p.HasValue {
		v, _ := json.Marshal(p.Value)
		return fmt.Sprintf("{'op': '%s', 'path': '%s', 'value': %s}", p.Op, p.Path, v)
	}
	return fmt.Sprintf("{'op': '%s', 'path': '%s'}", p.Op, p.Path)
}

// applyOp applies p at segs under node and returns the new node.
func applyOp(node any, segs []string, p patchOp) (any, error) {
	key := segs[0]
	last := len(segs) == 1
	switch c := node.(type) {
	case map[string]any:
		child, exists := c[key]
		if last {
			switch p.Op {
			case "add":
				c[key] = deepCopy(p.Value)
			case "replace":
				if !exists {
					return nil, fmt.Errorf("can't replace a non-existent object '%s'", key)
				}
				c[key] = deepCopy(p.Value)
			case "remove":
				if !exists {
					return nil, fmt.Errorf("can't remove a non-existent object '%s'", key)
				}
				delete(c, key)
			}
			return c, nil
		}
		if !exists {
			return nil, fmt.Errorf("member '%s' not found", key)
		}
		nc, err := applyOp(child, segs[1:], p)
		if err != nil {
			return nil, err
		}
		c[key] = nc
		return c, nil
	case []any:
		if last && p.Op == "add" && key == "-" {
			return append(c, deepCopy(p.Value)), nil
		}
		i, err := strconv.Atoi(key)
		if err != nil || i < 0 || (key != "0" && strings.HasPrefix(key, "0")) {
			return nil, fmt.Errorf("'%s' is not a valid sequence index", key)
		}
		if last {
			switch p.Op {
			case "add":
				if i > len(c) {
					return nil, fmt.Errorf("can't insert outside of list")
				}
				c = append(c, nil)
				copy(c[i+1:], c[i:])
				c[i] = deepCopy(p.Value)
				return c, nil
			case "replace":
				if i >= len(c) {
					return nil, fmt.Errorf("can't replace outside of list")
				}
				c[i] = deepCopy(p.Value)
				return c, nil
			case "remove":
				if i >= len(c) {
					return nil, fmt.Errorf("can't remove a non-existent object '%s'", key)
				}
				return append(c[:i], c[i+1:]...), nil
			}
		}
		if i >= len(c) {
			return nil, fmt.Errorf("index '%s' out of range", key)
		}
		nc, err := applyOp(c[i], segs[1:], p)
		if err != nil {
			return nil, err
		}
		c[i] = nc
		return c, nil
	}
	return nil, fmt.Errorf("member '%s' not found: its parent is not an object or a list", key)
}

// deepCopy copies a decoded JSON value.
func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, x := range t {
			m[k] = deepCopy(x)
		}
		return m
	case []any:
		s := make([]any, len(t))
		for i, x := range t {
			s[i] = deepCopy(x)
		}
		return s
	}
	return v
}
