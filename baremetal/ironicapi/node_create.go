package ironicapi

import (
	"errors"
	"net/http"
	"regexp"
	"sort"
	"strings"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver"
)

// Node name rules by version: before 1.10 a name had to be hostname
// safe (Ironic's is_hostname_safe); from 1.10 it may hold RFC 3986
// unreserved characters, such as "namespace~host".
var (
	hostnameSafe    = regexp.MustCompile(`^[a-z0-9]([a-z0-9\-]{0,61}[a-z0-9])?(\.[a-z0-9\-_]{0,62}[a-z0-9])*\.?$`)
	unreservedChars = regexp.MustCompile(`^[A-Za-z0-9\-._~]+$`)
)

// nodeReservedNames are the words a node cannot be named: the sub-resources
// and custom actions of Ironic's nodes controller, in the order Ironic
// lists them.
var nodeReservedNames = []string{"maintenance", "management", "states", "vendor_passthru", "detail", "validate"}

// checkNodeName applies Ironic's _check_names_acceptable: names exist
// from 1.5 (406 before), follow the version's character rules, are not
// UUIDs and not reserved words. invalidMsg has one %s for the name.
func (rq *request) checkNodeName(name, invalidMsg string) error {
	if !rq.v.AtLeast(5) {
		return notAcceptable("Request not acceptable.")
	}
	valid := len(name) <= 255 && !looksLikeUUID(name)
	if rq.v.AtLeast(10) {
		valid = valid && unreservedChars.MatchString(name)
	} else {
		valid = valid && hostnameSafe.MatchString(name)
	}
	if !valid {
		return badRequest(invalidMsg, name)
	}
	for _, r := range nodeReservedNames {
		if name == r {
			return badRequest("The word \"%s\" is reserved and can not be used as a node name. Reserved words are: %s.",
				name, strings.Join(nodeReservedNames, ", "))
		}
	}
	return nil
}

// emptyForVersion reports whether v is the value a field newer than the
// request may carry anyway (Ironic's reject_fields_in_newer_versions:
// null, "" for conductor_group).
func emptyForVersion(field string, v any) bool {
	if v == nil {
		return true
	}
	s, ok := v.(string)
	return ok && s == "" && field == "conductor_group"
}

// POST /v1/nodes: every writable field, gated by version; below 1.11 the
// node is created directly in available, as Ironic does.
func (h *Handler) createNode(rq *request) error {
	var doc map[string]any
	if err := rq.decode(&doc); err != nil {
		return err
	}
	if doc == nil {
		return badRequest("The request body must be a JSON object describing the node.")
	}
	keys := make([]string, 0, len(doc))
	for k := range doc {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	// Unknown and read-only fields are refused first, then fields newer
	// than the request (406).
	for _, k := range keys {
		if !nodeWritable[k] {
			if _, known := nodeFieldVersions[k]; known {
				return badRequest("The field %s of a node cannot be set at creation.", k)
			}
			return badRequest("Unknown attribute for argument node: %s", k)
		}
	}
	for _, k := range keys {
		if minor := nodeFieldVersions[k]; minor > 0 && !rq.v.AtLeast(minor) && !emptyForVersion(k, doc[k]) {
			return notAcceptable("Request not acceptable.")
		}
	}
	n := &baremetal.Node{}
	if name, ok := doc["name"].(string); ok {
		if err := rq.checkNodeName(name, "Cannot create node with invalid name '%s'"); err != nil {
			return err
		}
		n.Name = name
	}
	for _, k := range keys {
		if doc[k] == nil || (minorOf(k) > 0 && !rq.v.AtLeast(minorOf(k))) {
			continue
		}
		if err := rq.setNodeField(n, k, doc[k]); err != nil {
			return err
		}
	}
	if n.Driver == "" {
		return badRequest("Mandatory field missing: driver is required to create a node.")
	}
	if err := rq.checkNodeChassis("", n.ChassisUUID); err != nil {
		return err
	}
	created, err := h.c.EnrollWith(rq.ctx, n, conductor.EnrollOptions{Available: !rq.v.AtLeast(11)})
	if err != nil {
		return interfaceError(chassisRefusal(err))
	}
	rq.w.Header().Set("Location", rq.baseURL()+"/v1/nodes/"+created.UUID)
	return rq.reply(http.StatusCreated, rq.nodeView(created))
}

func minorOf(field string) int { return nodeFieldVersions[field] }

// interfaceError maps the driver registry's refusals of a node's
// interfaces (unknown, disabled, unsupported by the hardware type, no
// default) to Ironic's 400; other errors are returned unchanged.
func interfaceError(err error) error {
	if errors.Is(err, driver.ErrInterfaceNotFound) || errors.Is(err, driver.ErrIncompatibleInterface) ||
		errors.Is(err, driver.ErrNoValidDefault) {
		return publicError(http.StatusBadRequest, err)
	}
	return err
}
