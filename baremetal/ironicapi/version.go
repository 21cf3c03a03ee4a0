package ironicapi

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Version is an API microversion, 1.Minor. Ironic's major version is
// always 1.
type Version struct {
	Major, Minor int
}

// The microversions the handler offers. The handler answers a request
// without a version header at MinVersion, as Ironic does.
var (
	MinVersion = Version{1, 1}
	MaxVersion = Version{1, 115}
)

// The version headers Ironic reads and writes.
const (
	headerVersion     = "X-OpenStack-Ironic-API-Version"
	headerMinVersion  = "X-OpenStack-Ironic-API-Minimum-Version"
	headerMaxVersion  = "X-OpenStack-Ironic-API-Maximum-Version"
	headerAPIVersion  = "OpenStack-API-Version"
	apiVersionService = "baremetal"
)

func (v Version) String() string { return strconv.Itoa(v.Major) + "." + strconv.Itoa(v.Minor) }

// AtLeast reports whether v is 1.minor or later.
func (v Version) AtLeast(minor int) bool { return v.Major > 1 || (v.Major == 1 && v.Minor >= minor) }

func (v Version) less(o Version) bool {
	if v.Major != o.Major {
		return v.Major < o.Major
	}
	return v.Minor < o.Minor
}

// ParseVersion parses "1.78" or "latest" (MaxVersion).
func ParseVersion(s string) (Version, error) {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, "latest") {
		return MaxVersion, nil
	}
	maj, min, ok := strings.Cut(s, ".")
	if !ok {
		return Version{}, fmt.Errorf("version %q is not of the form major.minor", s)
	}
	a, err1 := strconv.Atoi(maj)
	b, err2 := strconv.Atoi(min)
	if err1 != nil || err2 != nil || a < 0 || b < 0 || len(s) > 16 {
		return Version{}, fmt.Errorf("version %q is not of the form major.minor", s)
	}
	return Version{a, b}, nil
}

// requestedVersion reads the version a request asks for: the
// OpenStack-API-Version header ("baremetal 1.x") first, then the legacy
// X-OpenStack-Ironic-API-Version, else MinVersion. An unparsable value is
// an *Error with 406, worded as Ironic words it.
func requestedVersion(h http.Header) (Version, *Error) {
	raw := ""
	for _, line := range h.Values(headerAPIVersion) {
		for _, item := range strings.Split(line, ",") {
			svc, ver, ok := strings.Cut(strings.TrimSpace(item), " ")
			if ok && strings.EqualFold(svc, apiVersionService) {
				raw = strings.TrimSpace(ver)
			}
		}
	}
	if raw == "" {
		raw = h.Get(headerVersion)
	}
	if raw == "" {
		return MinVersion, nil
	}
	v, err := ParseVersion(raw)
	if err != nil {
		return Version{}, &Error{Status: http.StatusNotAcceptable, Message: "Invalid value for " + headerVersion + " header"}
	}
	if v.Major != 1 {
		return v, &Error{Status: http.StatusNotAcceptable, Message: fmt.Sprintf(
			"Mutually exclusive versions requested. Version %s requested but not supported by this service. The supported version range is: [%s, %s].",
			v, MinVersion, MaxVersion)}
	}
	if v.less(MinVersion) || MaxVersion.less(v) {
		return v, &Error{Status: http.StatusNotAcceptable, Message: fmt.Sprintf(
			"Version %s was requested but the minor version is not supported by this service. The supported version range is: [%s, %s].",
			v, MinVersion, MaxVersion)}
	}
	return v, nil
}
