package steps

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// ValidateOptions tunes ValidateUserSteps.
type ValidateOptions struct {
	// Origin labels the problems (and, for deploy steps, picks Ironic's
	// error prefix). The zero value means OriginUser.
	Origin Origin
	// DisableRamdisk refuses steps that need the agent (clean and service
	// steps declared with requires_ramdisk, and every in-band step).
	DisableRamdisk bool
	// SkipMissing silently drops steps the driver does not know yet, for
	// validation before the agent reported its in-band steps.
	SkipMissing bool
	// Disallowed lists "interface.step" keys users may not request.
	Disallowed []string
}

// ValidationResult is what ValidateUserSteps keeps of the user's steps.
type ValidationResult struct {
	// Steps are the user's steps in the user's order, completed from the
	// driver (clean and service steps take the driver's priority and
	// abortable flag; deploy steps keep the user's priority). Reserved
	// steps and steps for child nodes pass through unvalidated.
	Steps []Step
	// NeedsRamdisk reports whether any validated step needs the agent.
	NeedsRamdisk bool
	// Skipped lists the steps dropped by SkipMissing.
	Skipped []Step
}

// ValidateUserSteps checks user-requested steps of one kind against every
// step the node offers (all priorities, including 0), with Ironic's rules
// and wording: unknown step, unexpected arguments, missing required
// arguments (always for clean and service steps, for deploy steps only
// when the requested priority is above 0), ramdisk required while
// disabled, the core deploy.deploy step requested with a priority above
// 0, duplicated deploy steps, and steps on the disallow list. All
// problems are returned together in one *ValidationError.
func ValidateUserSteps(kind Kind, user, available []Step, opts ValidateOptions) (ValidationResult, error) {
	res, problems := validateUserSteps(kind, user, available, opts)
	if len(problems) > 0 {
		return res, &ValidationError{Kind: kind, Problems: problems}
	}
	return res, nil
}

func validateUserSteps(kind Kind, user, available []Step, opts ValidateOptions) (ValidationResult, []Problem) {
	origin := opts.Origin
	if origin == "" {
		origin = OriginUser
	}
	byKey := make(map[string]Step, len(available))
	for _, s := range available {
		byKey[s.Key()] = s // the last declaration wins, as in Ironic
	}
	var (
		res       ValidationResult
		problems  []Problem
		validated []Step
	)
	add := func(code ProblemCode, us Step, names []string, msg string) {
		problems = append(problems, Problem{Code: code, Origin: origin, Step: us.clone(), Names: names, Message: msg})
	}
	for _, us := range user {
		if us.ExecuteOnChildNodes || us.IsReserved() {
			res.Steps = append(res.Steps, us.clone())
			continue
		}
		repr := userStepRepr(kind, us)
		if containsString(opts.Disallowed, us.Key()) {
			add(ProblemNotAllowed, us, nil, fmt.Sprintf("%s step %s is not allowed: %s is on the disallow_%s_steps list", kind, repr, us.Key(), kind))
			continue
		}
		ds, ok := byKey[us.Key()]
		if !ok {
			if opts.SkipMissing {
				res.Skipped = append(res.Skipped, us.clone())
				continue
			}
			add(ProblemUnknownStep, us, nil, fmt.Sprintf("node does not support this %s step: %s", kind, repr))
			continue
		}
		var unexpected []string
		for a := range us.Args {
			if _, ok := ds.ArgsInfo[a]; !ok {
				unexpected = append(unexpected, a)
			}
		}
		if len(unexpected) > 0 {
			sort.Strings(unexpected)
			add(ProblemUnexpectedArgs, us, unexpected, fmt.Sprintf("%s step %s has these unexpected arguments: %s", kind, repr, strings.Join(unexpected, ", ")))
		}
		if kind != Deploy || us.Priority > 0 {
			var missingNames, missing []string
			// Ironic lists them in the order the step declares them.
			for _, a := range ds.ArgNames() {
				info := ds.ArgsInfo[a]
				if _, given := us.Args[a]; info.Required && !given {
					missingNames = append(missingNames, a)
					if info.Description != "" {
						missing = append(missing, a+" ("+info.Description+")")
					} else {
						missing = append(missing, a)
					}
				}
			}
			if len(missing) > 0 {
				add(ProblemMissingArgs, us, missingNames, fmt.Sprintf("%s step %s is missing these required arguments: %s", kind, repr, strings.Join(missing, ", ")))
			}
			if opts.DisableRamdisk && ds.RequiresRamdisk {
				add(ProblemNeedsRamdisk, us, nil, fmt.Sprintf("%s step %s requires booting a ramdisk", kind, repr))
			}
		}
		r := us.clone()
		if kind != Deploy {
			// Users cannot choose these; they come from the driver.
			r.Abortable = ds.Abortable
			r.Priority = ds.Priority
		} else if us.Priority > 0 && ds.Interface == InterfaceDeploy && ds.Name == "deploy" {
			add(ProblemCoreStep, us, nil, fmt.Sprintf("deploy step %s on interface %s is a core step and cannot be overridden by user steps. It may be disabled by setting the priority to 0", us.Name, us.Interface))
		}
		if ds.RequiresRamdisk {
			res.NeedsRamdisk = true
		}
		validated = append(validated, r)
		res.Steps = append(res.Steps, r)
	}
	if kind == Deploy {
		if dups := duplicateKeys(validated); len(dups) > 0 {
			problems = append(problems, Problem{Code: ProblemDuplicates, Origin: origin, Names: dups,
				Message: "deploy steps from all deploy templates matching this node's instance traits cannot have the same interface and step. Duplicate deploy steps for " + strings.Join(dups, ", ")})
		}
	}
	return res, problems
}

func sortedArgNames(info map[string]ArgInfo) []string {
	names := make([]string, 0, len(info))
	for n := range info {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func duplicateKeys(list []Step) []string {
	count := map[string]int{}
	for _, s := range list {
		count[s.Key()]++
	}
	var dups []string
	for k, n := range count {
		if n > 1 {
			dups = append(dups, k)
		}
	}
	sort.Strings(dups)
	return dups
}

// userStepRepr renders a user step the way Ironic's messages show it: the
// Python repr of the step dictionary the user sent.
func userStepRepr(kind Kind, s Step) string {
	var b strings.Builder
	b.WriteString("{'interface': ")
	writePyRepr(&b, s.Interface)
	b.WriteString(", 'step': ")
	writePyRepr(&b, s.Name)
	if s.Args != nil {
		b.WriteString(", 'args': ")
		writePyRepr(&b, s.Args)
	}
	if kind == Deploy {
		b.WriteString(", 'priority': ")
		b.WriteString(strconv.Itoa(s.Priority))
	}
	b.WriteString("}")
	return b.String()
}

// pyFloatRepr writes f as Python's repr of a float does: fixed notation
// with at least one decimal for exponents from -4 to 15, scientific
// notation (two exponent digits at least) otherwise.
func pyFloatRepr(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	if f == 0 {
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	exp := int(math.Floor(math.Log10(math.Abs(f))))
	sci := strconv.FormatFloat(f, 'e', -1, 64)
	if i := strings.LastIndexByte(sci, 'e'); i >= 0 {
		// The decimal exponent of the shortest digits, which Log10 can
		// miss by one near powers of ten.
		if e, err := strconv.Atoi(sci[i+1:]); err == nil {
			exp = e
		}
	}
	if exp < -4 || exp >= 16 {
		return sci
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}

// writePyRepr writes a JSON-like value as Python's repr would print it
// after json.loads; map keys are sorted.
func writePyRepr(b *strings.Builder, v any) {
	switch t := v.(type) {
	case nil:
		b.WriteString("None")
	case bool:
		if t {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case string:
		q := byte('\'')
		if strings.ContainsRune(t, '\'') && !strings.ContainsRune(t, '"') {
			q = '"'
		}
		b.WriteByte(q)
		for _, r := range t {
			switch {
			case r == '\\':
				b.WriteString(`\\`)
			case r == rune(q):
				b.WriteByte('\\')
				b.WriteRune(r)
			case r == '\n':
				b.WriteString(`\n`)
			case r == '\t':
				b.WriteString(`\t`)
			case r == '\r':
				b.WriteString(`\r`)
			case r < 0x20 || r == 0x7f:
				fmt.Fprintf(b, `\x%02x`, r)
			default:
				b.WriteRune(r)
			}
		}
		b.WriteByte(q)
	case json.Number:
		// The exact text read: an integer literal is a Python int, any
		// other a Python float.
		s := string(t)
		if strings.ContainsAny(s, ".eE") {
			f, _ := strconv.ParseFloat(s, 64)
			b.WriteString(pyFloatRepr(f))
		} else if s == "-0" {
			b.WriteString("0")
		} else {
			b.WriteString(s)
		}
	case float64:
		// A float64 in step arguments holds a number encoding/json writes
		// back as the text read (see internal/jsonexact): an integral
		// value was an integer literal, a Python int.
		if t == math.Trunc(t) && math.Abs(t) < 1e21 {
			b.WriteString(strconv.FormatFloat(t, 'f', -1, 64))
		} else {
			b.WriteString(pyFloatRepr(t))
		}
	case int:
		b.WriteString(strconv.Itoa(t))
	case int64:
		b.WriteString(strconv.FormatInt(t, 10))
	case []any:
		b.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				b.WriteString(", ")
			}
			writePyRepr(b, e)
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(", ")
			}
			writePyRepr(b, k)
			b.WriteString(": ")
			writePyRepr(b, t[k])
		}
		b.WriteByte('}')
	default:
		fmt.Fprintf(b, "%v", t)
	}
}
