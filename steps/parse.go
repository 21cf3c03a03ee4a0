package steps

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/anvilmetal/anvil/internal/jsonexact"
)

// ParseUserSteps decodes a user step list as the API receives it
// (clean_steps, deploy_steps or service_steps of a provision request) and
// checks it against Ironic's request schema:
//
//   - the list is a JSON array of objects;
//   - "interface" is required and names an interface of the cleaning table
//     (clean and service steps) or the deploying table (deploy steps);
//   - "step" is a required non-empty string;
//   - "args" is an object, required for deploy steps;
//   - "priority" is required for deploy steps (a non-negative integer, or
//     a string of digits) and refused for the others;
//   - "execute_on_child_nodes" (boolean) and "limit_child_node_execution"
//     (array of strings) are accepted for clean and service steps;
//   - no other key is allowed.
//
// Every defect is reported in one *ParseError; it never panics.
func ParseUserSteps(kind Kind, data []byte) ([]Step, error) {
	perr := &ParseError{Kind: kind}
	if kind != Clean && kind != Deploy && kind != Service {
		perr.Problems = append(perr.Problems, ParseProblem{Index: -1, Problem: fmt.Sprintf("user steps of kind %q are not accepted", kind)})
		return nil, perr
	}
	var items []json.RawMessage
	if err := json.Unmarshal(data, &items); err != nil || (items == nil && !bytes.Equal(bytes.TrimSpace(data), []byte("[]"))) {
		problem := "want a JSON array of step objects"
		if err != nil {
			problem += ": " + describeJSONError(err)
		} else {
			problem += ", got null"
		}
		perr.Problems = append(perr.Problems, ParseProblem{Index: -1, Problem: problem})
		return nil, perr
	}
	out := make([]Step, 0, len(items))
	for i, raw := range items {
		s, problems := parseUserStep(kind, i, raw)
		perr.Problems = append(perr.Problems, problems...)
		out = append(out, s)
	}
	if len(perr.Problems) > 0 {
		return nil, perr
	}
	return out, nil
}

func parseUserStep(kind Kind, i int, raw json.RawMessage) (Step, []ParseProblem) {
	var problems []ParseProblem
	bad := func(field, format string, a ...any) {
		problems = append(problems, ParseProblem{Index: i, Field: field, Problem: fmt.Sprintf(format, a...)})
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		bad("", "want an object, got %s", rawTypeName(raw))
		return Step{}, problems
	}
	var s Step
	allowed := []string{"interface", "step", "args"}
	if kind == Deploy {
		allowed = append(allowed, "priority")
	} else {
		allowed = append(allowed, "execute_on_child_nodes", "limit_child_node_execution")
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !containsString(allowed, k) {
			bad(k, "unexpected key; allowed keys are %s", strings.Join(allowed, ", "))
		}
	}
	ifaces := kind.userInterfaces()
	if v, ok := fields["interface"]; !ok {
		bad("interface", "is required")
	} else if err := json.Unmarshal(v, &s.Interface); err != nil || isJSONNull(v) {
		bad("interface", "want a string, got %s", rawTypeName(v))
	} else if !containsString(ifaces, s.Interface) {
		bad("interface", "%q is not one of %s", s.Interface, strings.Join(ifaces, ", "))
	}
	if v, ok := fields["step"]; !ok {
		bad("step", "is required")
	} else if err := json.Unmarshal(v, &s.Name); err != nil || isJSONNull(v) {
		bad("step", "want a string, got %s", rawTypeName(v))
	} else if s.Name == "" {
		bad("step", "must not be empty")
	}
	if v, ok := fields["args"]; !ok {
		if kind == Deploy {
			bad("args", "is required for deploy steps")
		}
	} else if err := jsonexact.Decode(v, &s.Args); err != nil || s.Args == nil {
		bad("args", "want an object, got %s", rawTypeName(v))
	}
	if kind == Deploy {
		if v, ok := fields["priority"]; !ok {
			bad("priority", "is required for deploy steps")
		} else if p, ok := parsePriority(v); !ok {
			bad("priority", "want a non-negative integer, got %s", rawTypeName(v))
		} else {
			s.Priority = p
		}
	}
	if v, ok := fields["execute_on_child_nodes"]; ok && kind != Deploy {
		if err := json.Unmarshal(v, &s.ExecuteOnChildNodes); err != nil || isJSONNull(v) {
			bad("execute_on_child_nodes", "want a boolean, got %s", rawTypeName(v))
		}
	}
	if v, ok := fields["limit_child_node_execution"]; ok && kind != Deploy {
		if err := json.Unmarshal(v, &s.LimitChildNodeExecution); err != nil || isJSONNull(v) {
			bad("limit_child_node_execution", "want an array of strings, got %s", rawTypeName(v))
		}
	}
	return s, problems
}

// parsePriority accepts what Ironic's deploy step schema accepts: a
// non-negative integer or a string of digits.
func parsePriority(v json.RawMessage) (int, bool) {
	var n json.Number
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var anyv any
	if err := dec.Decode(&anyv); err != nil {
		return 0, false
	}
	switch t := anyv.(type) {
	case json.Number:
		n = t
	case string:
		if t == "" || strings.Trim(t, "0123456789") != "" {
			return 0, false
		}
		n = json.Number(t)
	default:
		return 0, false
	}
	p, err := strconv.ParseInt(string(n), 10, 32)
	if err != nil || p < 0 {
		return 0, false
	}
	return int(p), true
}

func isJSONNull(v json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(v), []byte("null")) }

func rawTypeName(v json.RawMessage) string {
	t := bytes.TrimSpace(v)
	if len(t) == 0 {
		return "nothing"
	}
	switch t[0] {
	case 'n':
		return "null"
	case 't', 'f':
		return "a boolean"
	case '"':
		return "a string"
	case '[':
		return "an array"
	case '{':
		return "an object"
	}
	return "a number " + string(t)
}

func describeJSONError(err error) string {
	switch e := err.(type) {
	case *json.SyntaxError:
		return fmt.Sprintf("malformed JSON at byte %d: %v", e.Offset, e)
	case *json.UnmarshalTypeError:
		return fmt.Sprintf("got a JSON %s", e.Value)
	}
	return err.Error()
}
