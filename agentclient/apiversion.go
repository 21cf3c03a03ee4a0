package agentclient

import (
	"fmt"
	"strconv"
	"strings"
)

// APIVersion is an Ironic API microversion such as 1.68.
type APIVersion struct {
	Major, Minor int
}

// String renders the version as "major.minor".
func (v APIVersion) String() string { return strconv.Itoa(v.Major) + "." + strconv.Itoa(v.Minor) }

// Less reports whether v is older than o.
func (v APIVersion) Less(o APIVersion) bool {
	if v.Major != o.Major {
		return v.Major < o.Major
	}
	return v.Minor < o.Minor
}

// AtLeast reports whether v is o or newer.
func (v APIVersion) AtLeast(o APIVersion) bool { return !v.Less(o) }

// ParseAPIVersion parses "major.minor" with non-negative decimal numbers.
func ParseAPIVersion(s string) (APIVersion, error) {
	maj, min, ok := strings.Cut(strings.TrimSpace(s), ".")
	if !ok {
		return APIVersion{}, fmt.Errorf("%w: API version %q is not major.minor", ErrInvalidArgument, s)
	}
	a, err1 := strconv.ParseUint(maj, 10, 16)
	b, err2 := strconv.ParseUint(min, 10, 16)
	if err1 != nil || err2 != nil {
		return APIVersion{}, fmt.Errorf("%w: API version %q is not major.minor", ErrInvalidArgument, s)
	}
	return APIVersion{Major: int(a), Minor: int(b)}, nil
}

// SupportedAPIVersions returns the oldest and newest microversions the
// handler serves. A request without a version header gets the oldest, as in
// Ironic; the newest is the one that added node_uuid and the lookup-style
// answer to POST /v1/continue_inspection. IPA caps the version of its
// lookup (1.62) and heartbeats (1.68) itself, so raising the maximum does
// not change what a stock agent sends there.
func SupportedAPIVersions() (minimum, maximum APIVersion) { return minAPIVersion, maxAPIVersion }

// Microversions of the Ironic API that matter to the ramdisk endpoints.
// They are never modified.
var (
	minAPIVersion = APIVersion{1, 1}
	maxAPIVersion = APIVersion{1, 84}

	versionRamdiskEndpoints = APIVersion{1, 22}
	versionAgentVersion     = APIVersion{1, 36}
	versionAgentToken       = APIVersion{1, 62}
	versionAgentVerifyCA    = APIVersion{1, 68}
	versionAgentStatus      = APIVersion{1, 72}
	// versionContinueInspection added POST /v1/continue_inspection, which
	// is also served at 1.1 (no version header) for agents of the
	// ironic-inspector era.
	versionContinueInspection = APIVersion{1, 83}
	// versionInspectionLookup added the node_uuid query parameter of
	// continue_inspection and its lookup-style answer (node, config and
	// agent token) instead of {"uuid": ...}.
	versionInspectionLookup = APIVersion{1, 84}
)

// Header names of Ironic's microversion negotiation.
const (
	HeaderAPIVersion    = "X-OpenStack-Ironic-API-Version"
	HeaderAPIMinVersion = "X-OpenStack-Ironic-API-Minimum-Version"
	HeaderAPIMaxVersion = "X-OpenStack-Ironic-API-Maximum-Version"
	headerOpenStackAPI  = "OpenStack-API-Version"
)
