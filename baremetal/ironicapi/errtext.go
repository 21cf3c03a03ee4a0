package ironicapi

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver"
)

// publicMessage is the faultstring a client sees for err, an error of the
// conductor, the store or a driver: worded as Ironic words the same
// condition, from the typed error's fields, without the wrapping the
// library adds ("enroll node …: ", "update node …: ") or its package
// prefixes ("baremetal: ", "driver: ", "conductor: "). The handler logs
// err itself, masked, for operators.
func publicMessage(err error) string {
	var (
		hwType     *driver.HardwareTypeNotFoundError
		ifNotFound *driver.InterfaceNotFoundError
		incompat   *driver.IncompatibleInterfaceError
		noDefault  *driver.NoValidDefaultError
		unsupp     *driver.UnsupportedError
		missing    *driver.MissingParameterError
		invalidArg *driver.InvalidParameterError
		stepNF     *driver.StepNotFoundError
		nf         *baremetal.NotFoundError
		dup        *baremetal.DuplicateError
		invalid    *baremetal.InvalidFieldError
		inUse      *baremetal.NodeInUseError
		conflict   *baremetal.ConflictError
		pgNotEmpty *baremetal.PortgroupNotEmptyError
		chNotEmpty *baremetal.ChassisNotEmptyError
		verb       *conductor.VerbError
		limit      *conductor.ConcurrentActionLimitError
		noCond     *conductor.NoConductorError
	)
	switch {
	case errors.As(err, &verb):
		return verbMessage(verb)
	case errors.As(err, &limit):
		return "Unable to process request at this time. The concurrent action limit for " + limit.Action +
			" has been reached. Please try again later."
	case errors.As(err, &hwType):
		return fmt.Sprintf("No valid host was found. Reason: No conductor service registered which supports driver %s for conductor group \"\".", hwType.Name)
	case errors.As(err, &noCond):
		return fmt.Sprintf("No valid host was found. Reason: No conductor service registered which supports driver %s for conductor group \"%s\".", noCond.HardwareType, noCond.Group)
	case errors.Is(err, conductor.ErrNoConductor), errors.Is(err, conductor.ErrConductorNotRunning):
		return "No valid host was found. Reason: no conductor is running to process the request."
	case errors.As(err, &ifNotFound):
		msg := fmt.Sprintf("Could not find the following interface in the 'ironic.hardware.interfaces.%s' entrypoint: %s. Valid interfaces are %s.",
			ifNotFound.Kind, ifNotFound.Name, pyList(ifNotFound.Valid))
		if hint := ifNotFound.Hint(); hint != "" {
			msg += " " + sentence(hint)
		}
		return msg
	case errors.As(err, &incompat):
		return fmt.Sprintf("%s interface implementation '%s' is not supported by hardware type %s.", incompat.Kind, incompat.Name, incompat.HardwareType)
	case errors.As(err, &noDefault):
		who := noDefault.Node
		if who == "" {
			who = "(new node)"
		}
		return fmt.Sprintf("No valid default %s interface for node %s with hardware type %s. Enabled %s interfaces: %s; supported by the hardware type: %s.",
			noDefault.Kind, who, noDefault.HardwareType, noDefault.Kind, pyList(noDefault.Enabled), pyList(noDefault.Supported))
	case errors.As(err, &unsupp):
		of := ""
		if unsupp.Node != "" {
			of = " of node " + unsupp.Node
		}
		if unsupp.Impl == "" {
			return fmt.Sprintf("The driver%s has no %s interface: %s is not supported.", of, unsupp.Kind, unsupp.Operation)
		}
		return fmt.Sprintf("The %s interface %s%s does not support %s (disabled or not implemented).", unsupp.Kind, unsupp.Impl, of, unsupp.Operation)
	case errors.As(err, &missing):
		keys := make([]string, len(missing.Missing))
		for i, k := range missing.Missing {
			keys[i] = k
			if h := missing.Hints[k]; h != "" {
				keys[i] = k + " (" + h + ")"
			}
		}
		return fmt.Sprintf("Missing the following parameters in node %s's %s, required by its %s interface %s: %s.",
			orUnknown(missing.Node), missing.Field, missing.Kind, missing.Impl, strings.Join(keys, ", "))
	case errors.As(err, &invalidArg):
		what := invalidArg.Key
		if invalidArg.Field != "args" {
			what = invalidArg.Field + "[" + invalidArg.Key + "]"
		}
		return fmt.Sprintf("Invalid value for %s of node %s: expected %s.", what, orUnknown(invalidArg.Node), strings.TrimSuffix(invalidArg.Expected, "."))
	case errors.As(err, &stepNF):
		return fmt.Sprintf("The %s interface %s does not offer the %s step %s.", stepNF.Kind, stepNF.Impl, stepNF.StepKind, stepNF.Step)
	case errors.As(err, &inUse):
		return fmt.Sprintf("Node %s is locked by host %s, please retry after the current operation is completed.", inUse.Node, inUse.Holder)
	case errors.As(err, &conflict):
		return fmt.Sprintf("%s %s was changed by another request; retry the request.", kindTitle(conflict.Kind), conflict.Ident)
	case errors.As(err, &pgNotEmpty):
		return fmt.Sprintf("Cannot complete the requested action because portgroup %s contains ports.", pgNotEmpty.Portgroup)
	case errors.As(err, &chNotEmpty):
		return chNotEmpty.Error()
	case errors.As(err, &nf):
		return fmt.Sprintf("%s %s could not be found.", kindTitle(nf.Kind), nf.Ident)
	case errors.As(err, &dup):
		if dup.Field == "uuid" {
			return fmt.Sprintf("%s with UUID %s already exists.", kindTitle(dup.Kind), dup.Value)
		}
		return fmt.Sprintf("A %s with %s %s already exists.", kindNoun(dup.Kind), fieldNoun(dup.Field), dup.Value)
	case errors.As(err, &invalid):
		who := kindNoun(invalid.Kind)
		if invalid.Ident != "" {
			who += " " + invalid.Ident
		}
		return fmt.Sprintf("Invalid value for field %s of %s: expected %s.", invalid.Field, who, strings.TrimSuffix(invalid.Expected, "."))
	}
	return sentence(stripInternal(err.Error()))
}

// publicError is an *Error of status worded by publicMessage, err kept
// for the log.
func publicError(status int, err error) *Error {
	return &Error{Status: status, Message: publicMessage(err), detail: err.Error()}
}

// verbMessage words a refused verb as Ironic does where Ironic has the
// case (a protected node, an update during a transition), else as the
// verb, node, state and reason.
func verbMessage(v *conductor.VerbError) string {
	switch {
	case errors.Is(v, conductor.ErrNodeProtected):
		return fmt.Sprintf("Node %s is protected and cannot be undeployed, rebuilt or deleted", v.Node)
	case errors.Is(v, conductor.ErrUpdateInProgress):
		return fmt.Sprintf("Node %s can not be updated while a state transition is in progress.", v.Node)
	case v.Verb == "delete" && len(v.Allowed) > 0:
		// Ironic prints its tuple of states.
		q := make([]string, len(v.Allowed))
		for i, s := range v.Allowed {
			q[i] = "'" + string(s) + "'"
		}
		return fmt.Sprintf("Can not delete node \"%s\" while it is in provision state \"%s\". Valid provision states to perform deletion are: \"(%s)\", or set the node into maintenance mode",
			v.Node, v.State, strings.Join(q, ", "))
	}
	return sentence(fmt.Sprintf("Cannot %s node %s in state \"%s\": %s", v.Verb, v.Node, v.State, stripInternal(v.Reason)))
}

// internalPrefix matches the package prefixes of the library's errors at
// the start of a text or of one of its ": "-separated parts.
var internalPrefix = regexp.MustCompile(`(^|: )(?:baremetal|conductor|driver|sqlstore|ironicapi|plugin|steps|statemachine|agentclient): `)

// stripInternal removes the library's package prefixes from s.
func stripInternal(s string) string {
	for {
		t := internalPrefix.ReplaceAllString(s, "$1")
		if t == s {
			return s
		}
		s = t
	}
}

// sentence capitalises s and ends it with a period, as Ironic's messages.
func sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return s
	}
	if c := s[0]; c >= 'a' && c <= 'z' {
		s = string(c-'a'+'A') + s[1:]
	}
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

// kindTitle is a store kind as the subject of Ironic's messages
// ("Node", "Port", "Deploy template").
func kindTitle(kind string) string {
	s := kindNoun(kind)
	if s == "" {
		return "Resource"
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// kindNoun is a store kind in words ("deploy template").
func kindNoun(kind string) string { return strings.ReplaceAll(kind, "_", " ") }

// fieldNoun is a unique field in Ironic's words ("MAC address").
func fieldNoun(field string) string {
	switch field {
	case "address":
		return "MAC address"
	case "uuid":
		return "UUID"
	}
	return strings.ReplaceAll(field, "_", " ")
}

// pyList writes names as Python writes a list of strings, as Ironic's
// messages show them: ['a', 'b'].
func pyList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "'" + n + "'"
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func orUnknown(s string) string {
	if s == "" {
		return "(unknown)"
	}
	return s
}
