package agentclient

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/anvilmetal/anvil/clock"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/internal/macaddr"
	"github.com/anvilmetal/anvil/statemachine"
	"github.com/google/uuid"
)

// DefaultHeartbeatTimeout is Ironic's [api]ramdisk_heartbeat_timeout: the
// agent heartbeats every 30 to 60 % of it.
const DefaultHeartbeatTimeout = 300 * time.Second

// maxBodyBytes bounds a heartbeat body; a PEM certificate is a few KiB.
const maxBodyBytes = 256 << 10

// MaxLookupAddresses is the default bound on the MAC addresses of one
// lookup. IPA sends one per network interface, so a real node sends tens.
// Ironic's lookup has no count check of its own (its API server's bound on
// the request line stops a long list first); 1000 is Ironic's [api]
// max_limit, the most items its API handles in one request, and keeps a
// lookup within NewServer's header bound.
const MaxLookupAddresses = 1000

// HandlerConfig configures the lookup and heartbeat handler. The zero value
// is Ironic's default configuration.
type HandlerConfig struct {
	// Logger receives one debug line per refused request and warnings for
	// backend failures. Tokens are never logged. Nil means slog.Default(),
	// as everywhere an embedder configures logging.
	Logger *slog.Logger
	// Clock stamps accepted heartbeats. Nil means the system clock.
	Clock clock.Clock
	// Rand is the randomness for new agent tokens. Nil means crypto/rand.
	Rand io.Reader

	// DisableRamdiskEndpoints is the inverse of Ironic's
	// [api]enable_ramdisk_endpoints: when set lookup, heartbeat and
	// continue_inspection answer 403.
	DisableRamdiskEndpoints bool
	// UnrestrictedLookup is the inverse of [api]restrict_lookup: when set,
	// lookup succeeds whatever the node's provision state.
	UnrestrictedLookup bool
	// AllowInsecureCallback is the inverse of [agent]require_tls (true by
	// default since Ironic 2024.2): when set, http:// callback URLs are
	// accepted.
	AllowInsecureCallback bool
	// HeartbeatTimeout is [api]ramdisk_heartbeat_timeout, sent to the agent
	// at lookup. Zero means DefaultHeartbeatTimeout.
	HeartbeatTimeout time.Duration
	// PublicURL is the base URL of this API as agents reach it, used in the
	// node links of a lookup answer. Empty means the request's scheme and
	// Host.
	PublicURL string
	// MaxInspectionBodyBytes bounds a continue_inspection body (the
	// inventory plus plugin data, which includes IPA's compressed logs when
	// its logs collector runs). Zero means MaxInspectionBodyBytes (4 MiB).
	MaxInspectionBodyBytes int64
	// MaxLookupAddresses bounds the MAC addresses one lookup may carry
	// (valid or not); a lookup with more is refused with 400 before any of
	// them is looked up. Zero means MaxLookupAddresses (1000).
	MaxLookupAddresses int
	// Lookup holds the rest of the lookup answer's config section. Nil
	// means DefaultLookupConfig(); agent_token, heartbeat_timeout and
	// agent_skip_bmc_detect are always set per request.
	Lookup *LookupConfig
}

// Handler serves the agent-facing endpoints of the Ironic API: GET / and
// GET /v1 (version discovery, which IPA reads before anything else),
// GET /v1/lookup, POST /v1/heartbeat/{node_ident} and, when the Backend
// implements InspectionBackend, POST /v1/continue_inspection. Mount it at
// the root of the URL the agents are given as ipa-api-url.
type Handler struct {
	backend Backend
	// inspection is backend as an InspectionBackend, or nil when it does
	// not implement the capability (continue_inspection is then not
	// routed and answers 404 like any unknown path).
	inspection InspectionBackend
	cfg        HandlerConfig
	lookup     LookupConfig
	log        *slog.Logger
	clock      clock.Clock
	mux        *http.ServeMux
}

// NewHandler returns a handler that checks every request as Ironic does and
// talks to b for node data. It fails when b is nil or PublicURL is not an
// absolute http(s) URL.
func NewHandler(b Backend, cfg HandlerConfig) (*Handler, error) {
	if b == nil {
		return nil, fmt.Errorf("%w: agentclient: NewHandler: backend is nil", ErrInvalidArgument)
	}
	if cfg.PublicURL != "" {
		u, err := url.Parse(cfg.PublicURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("%w: agentclient: NewHandler: PublicURL %q is not an absolute http(s) URL", ErrInvalidArgument, cfg.PublicURL)
		}
		cfg.PublicURL = strings.TrimRight(cfg.PublicURL, "/")
	}
	if cfg.MaxInspectionBodyBytes <= 0 {
		cfg.MaxInspectionBodyBytes = MaxInspectionBodyBytes
	}
	if cfg.HeartbeatTimeout <= 0 {
		cfg.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if cfg.MaxLookupAddresses <= 0 {
		cfg.MaxLookupAddresses = MaxLookupAddresses
	}
	h := &Handler{backend: b, cfg: cfg, log: cfg.Logger, clock: cfg.Clock}
	if h.log == nil {
		h.log = slog.Default()
	}
	if h.clock == nil {
		h.clock = clock.System()
	}
	if cfg.Lookup != nil {
		h.lookup = *cfg.Lookup
	} else {
		h.lookup = DefaultLookupConfig()
	}
	h.mux = http.NewServeMux()
	h.mux.HandleFunc("GET /{$}", h.serveRoot)
	h.mux.HandleFunc("GET /v1", h.serveV1)
	h.mux.HandleFunc("GET /v1/{$}", h.serveV1)
	h.mux.HandleFunc("GET /v1/lookup", h.serveLookup)
	h.mux.HandleFunc("GET /v1/lookup/{$}", h.serveLookup)
	h.mux.HandleFunc("POST /v1/heartbeat/{node_ident}", h.serveHeartbeat)
	h.mux.HandleFunc("POST /v1/heartbeat/{node_ident}/{$}", h.serveHeartbeat)
	if ib, ok := b.(InspectionBackend); ok {
		h.inspection = ib
		h.mux.HandleFunc("POST /v1/continue_inspection", h.serveContinueInspection)
		h.mux.HandleFunc("POST /v1/continue_inspection/{$}", h.serveContinueInspection)
	}
	h.mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeIronicError(w, http.StatusNotFound, "The resource could not be found.")
	})
	return h, nil
}

// ServeHTTP routes a request. Unknown paths and methods get Ironic's 404
// error body, and no request is ever redirected: http.ServeMux answers a
// path with "." or ".." segments or doubled slashes with a 307 to the
// cleaned path (so a heartbeat to /v1/heartbeat/. was sent to
// /v1/heartbeat), which an agent would follow to another resource or
// repeat for ever. Such paths are routed here instead: a heartbeat whose
// node segment is "." or ".." gets the heartbeat checks and their 400 for
// an identifier that is neither a UUID nor a node name, anything else the
// 404 of an unknown path.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		writeIronicError(w, http.StatusNotFound, "The resource could not be found.")
		return
	}
	if p := r.URL.EscapedPath(); r.RequestURI != "*" && !isCleanPath(p) {
		h.serveUncleanPath(w, r, p)
		return
	}
	h.mux.ServeHTTP(w, r)
}

// isCleanPath reports whether http.ServeMux would route the escaped path p
// as it is rather than redirect it: rooted, without "." or ".." segments
// or empty ones (a trailing slash is kept).
func isCleanPath(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	clean := path.Clean(p)
	if strings.HasSuffix(p, "/") && clean != "/" {
		clean += "/"
	}
	return clean == p
}

// serveUncleanPath answers a request whose escaped path p is not clean.
// Only a heartbeat path with one node segment (and an optional trailing
// slash) is a resource; its segment is the node identifier, which the
// heartbeat checks refuse.
func (h *Handler) serveUncleanPath(w http.ResponseWriter, r *http.Request, p string) {
	const prefix = "/v1/heartbeat/"
	if seg, ok := strings.CutPrefix(p, prefix); ok && r.Method == http.MethodPost {
		seg = strings.TrimSuffix(seg, "/")
		if ident, err := url.PathUnescape(seg); err == nil && seg != "" && !strings.Contains(seg, "/") {
			r.SetPathValue("node_ident", ident)
			h.serveHeartbeat(w, r)
			return
		}
	}
	h.refuse(w, r, http.StatusNotFound, "", "The resource could not be found.")
}

// validNodeIdent reports whether s can name a node in a heartbeat path, as
// Ironic's uuid_or_name check decides: a UUID, or a logical name of 1 to
// 255 RFC 3986 unreserved characters (letters, digits, "-", ".", "_",
// "~"). "." and ".." are path segments, never node names.
func validNodeIdent(s string) bool {
	if _, err := uuid.Parse(s); err == nil {
		return true
	}
	if s == "" || len(s) > 255 || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '.', c == '_', c == '~':
		default:
			return false
		}
	}
	return true
}

// writeIronicError writes an error the way the Ironic API does: the fault
// object JSON-encoded as a string inside error_message.
func writeIronicError(w http.ResponseWriter, status int, msg string) {
	code := "Client"
	if status >= 500 {
		code = "Server"
	}
	inner, _ := json.Marshal(struct {
		Faultcode   string  `json:"faultcode"`
		Faultstring string  `json:"faultstring"`
		Debuginfo   *string `json:"debuginfo"`
	}{code, msg, nil})
	body, _ := json.Marshal(map[string]string{"error_message": string(inner)})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// IronicError is the decoded body of an Ironic API error: error_message
// holding a JSON-encoded fault.
type IronicError struct {
	Faultcode   string `json:"faultcode"`
	Faultstring string `json:"faultstring"`
}

// ParseIronicError decodes an Ironic API error body. It returns false when
// body is not one.
func ParseIronicError(body []byte) (IronicError, bool) {
	var outer struct {
		ErrorMessage string `json:"error_message"`
	}
	if json.Unmarshal(body, &outer) != nil || outer.ErrorMessage == "" {
		return IronicError{}, false
	}
	var e IronicError
	if json.Unmarshal([]byte(outer.ErrorMessage), &e) != nil {
		return IronicError{Faultstring: outer.ErrorMessage}, true
	}
	return e, true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeIronicError(w, http.StatusInternalServerError, "Failed to encode the response.")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// negotiate reads the microversion header, sets the version response
// headers and returns the version to serve. It writes 406 and returns false
// when the header is malformed or out of range.
func (h *Handler) negotiate(w http.ResponseWriter, r *http.Request) (APIVersion, bool) {
	hd := w.Header()
	hd.Set(HeaderAPIMinVersion, minAPIVersion.String())
	hd.Set(HeaderAPIMaxVersion, maxAPIVersion.String())
	hd.Add("Vary", HeaderAPIVersion)
	raw := r.Header.Get(HeaderAPIVersion)
	if raw == "" {
		if v, ok := strings.CutPrefix(strings.TrimSpace(r.Header.Get(headerOpenStackAPI)), "baremetal "); ok {
			raw = v
		}
	}
	v := minAPIVersion
	switch strings.TrimSpace(raw) {
	case "":
	case "latest":
		v = maxAPIVersion
	default:
		parsed, err := ParseAPIVersion(raw)
		if err != nil {
			writeIronicError(w, http.StatusNotAcceptable, fmt.Sprintf("Invalid value for %s header", HeaderAPIVersion))
			return APIVersion{}, false
		}
		if parsed.Less(minAPIVersion) || maxAPIVersion.Less(parsed) {
			writeIronicError(w, http.StatusNotAcceptable, fmt.Sprintf(
				"Version %s was requested but the minor version is not supported by this service. The supported version range is: [%s, %s].",
				parsed, minAPIVersion, maxAPIVersion))
			return APIVersion{}, false
		}
		v = parsed
	}
	hd.Set(HeaderAPIVersion, v.String())
	hd.Set(headerOpenStackAPI, "baremetal "+v.String())
	return v, true
}

func (h *Handler) baseURL(r *http.Request) string {
	if h.cfg.PublicURL != "" {
		return h.cfg.PublicURL
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

type versionDoc struct {
	ID         string `json:"id"`
	Links      []Link `json:"links"`
	Status     string `json:"status"`
	MinVersion string `json:"min_version"`
	Version    string `json:"version"`
}

// Link is an Ironic resource link.
type Link struct {
	Href string `json:"href"`
	Rel  string `json:"rel"`
}

func (h *Handler) versionDoc(r *http.Request) versionDoc {
	return versionDoc{
		ID:         "v1",
		Links:      []Link{{Href: h.baseURL(r) + "/v1/", Rel: "self"}},
		Status:     "CURRENT",
		MinVersion: minAPIVersion.String(),
		Version:    maxAPIVersion.String(),
	}
}

// serveRoot answers version discovery; IPA reads default_version.version
// to pick the microversion of its lookup and heartbeats.
func (h *Handler) serveRoot(w http.ResponseWriter, r *http.Request) {
	if _, ok := h.negotiate(w, r); !ok {
		return
	}
	v := h.versionDoc(r)
	writeJSON(w, http.StatusOK, map[string]any{
		"name":            "OpenStack Ironic API",
		"description":     "Ironic-compatible ramdisk endpoints served by Anvil.",
		"default_version": v,
		"versions":        []versionDoc{v},
	})
}

func (h *Handler) serveV1(w http.ResponseWriter, r *http.Request) {
	if _, ok := h.negotiate(w, r); !ok {
		return
	}
	base := h.baseURL(r)
	writeJSON(w, http.StatusOK, map[string]any{
		"id": "v1",
		"links": []Link{
			{Href: base + "/v1/", Rel: "self"},
		},
		"media_types": []map[string]string{{"base": "application/json", "type": "application/vnd.openstack.ironic.v1+json"}},
		"lookup":      []Link{{Href: base + "/v1/lookup/", Rel: "self"}, {Href: base + "/lookup/", Rel: "bookmark"}},
		"heartbeat":   []Link{{Href: base + "/v1/heartbeat/", Rel: "self"}, {Href: base + "/heartbeat/", Rel: "bookmark"}},
	})
}

// refuse logs a refused request at debug level and writes the error.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, status int, node, msg string) {
	h.log.LogAttrs(r.Context(), slog.LevelDebug, "agentclient: refused ramdisk request",
		slog.String("path", r.URL.Path), slog.String("node", node), slog.Int("status", status), slog.String("reason", msg))
	writeIronicError(w, status, msg)
}

// lookupAllowedStates are Ironic's LOOKUP_ALLOWED_STATES.
func lookupAllowed(state statemachine.State, fastTrack bool) bool {
	switch state {
	case statemachine.Deploying, statemachine.DeployWait, statemachine.Cleaning, statemachine.CleanWait,
		statemachine.Inspecting, statemachine.InspectWait, statemachine.Rescuing, statemachine.RescueWait, statemachine.ServiceWait:
		return true
	case statemachine.Enroll, statemachine.Manageable, statemachine.Available, statemachine.Servicing, statemachine.ServiceHold:
		return fastTrack
	}
	return false
}

// ParseMAC normalises a MAC address as Ironic's lookup does, by the rule
// internal/macaddr owns: six hexadecimal octets separated all by colons
// or all by hyphens, returned in lower case with colons. Surrounding
// white space is trimmed. It reports false for anything else.
func ParseMAC(s string) (string, bool) { return macaddr.Parse(strings.TrimSpace(s)) }

// serveLookup implements GET /v1/lookup.
func (h *Handler) serveLookup(w http.ResponseWriter, r *http.Request) {
	if h.cfg.DisableRamdiskEndpoints {
		h.refuse(w, r, http.StatusForbidden, "", "Ramdisk endpoints are disabled.")
		return
	}
	ver, ok := h.negotiate(w, r)
	if !ok {
		return
	}
	if ver.Less(versionRamdiskEndpoints) {
		h.refuse(w, r, http.StatusNotFound, "", "The resource could not be found.")
		return
	}
	q := r.URL.Query()
	var lq LookupQuery
	given, seen := 0, map[string]bool{}
	var invalid []string
	for a := range strings.SplitSeq(q.Get("addresses"), ",") {
		if a = strings.TrimSpace(a); a == "" {
			continue
		}
		if given++; given > h.cfg.MaxLookupAddresses {
			h.refuse(w, r, http.StatusBadRequest, "", fmt.Sprintf("Too many addresses: a lookup may carry at most %d MAC addresses.", h.cfg.MaxLookupAddresses))
			return
		}
		switch mac, ok := ParseMAC(a); {
		case !ok:
			invalid = append(invalid, a)
		case !seen[mac]:
			seen[mac] = true
			lq.Addresses = append(lq.Addresses, mac)
		}
	}
	if n := len(invalid); n > 0 {
		shown := make([]string, 0, min(n, 8))
		for _, a := range invalid[:min(n, 8)] {
			shown = append(shown, truncateForLog(a))
		}
		h.log.LogAttrs(r.Context(), slog.LevelWarn, "agentclient: lookup: dropping invalid MAC addresses",
			slog.Int("count", n), slog.Any("addresses", shown))
	}
	if raw := q.Get("node_uuid"); raw != "" {
		id, err := uuid.Parse(raw)
		if err != nil || len(raw) != 36 {
			h.refuse(w, r, http.StatusBadRequest, "", fmt.Sprintf("Expected a UUID for node_uuid but received %q.", raw))
			return
		}
		lq.NodeUUID = id.String()
	}
	if lq.NodeUUID == "" && len(lq.Addresses) == 0 {
		h.refuse(w, r, http.StatusBadRequest, "", "One or more of the following fields are required and must be valid: addresses (MAC addresses), node_uuid.")
		return
	}
	const notFound = "Node could not be found or is not in a state that allows lookup."
	node, err := h.backend.LookupNode(r.Context(), lq)
	if err != nil {
		if errors.Is(err, ErrNodeNotFound) {
			h.refuse(w, r, http.StatusNotFound, lq.NodeUUID, notFound)
			return
		}
		h.backendFailure(w, r, "lookup", lq.NodeUUID, err)
		return
	}
	if !h.cfg.UnrestrictedLookup && !lookupAllowed(node.ProvisionState, node.FastTrack) {
		// Deliberately the same answer as "not found".
		h.refuse(w, r, http.StatusNotFound, node.UUID, notFound)
		return
	}
	candidate, err := NewToken(h.cfg.Rand)
	if err != nil {
		h.backendFailure(w, r, "lookup", node.UUID, err)
		return
	}
	created, err := h.backend.EnsureAgentToken(r.Context(), node.UUID, candidate)
	if err != nil {
		switch {
		case errors.Is(err, ErrNodeLocked):
			h.refuse(w, r, http.StatusConflict, node.UUID, fmt.Sprintf("Node %s is locked by another process; retry later.", node.UUID))
		case errors.Is(err, ErrNodeNotFound):
			h.refuse(w, r, http.StatusNotFound, node.UUID, notFound)
		default:
			h.backendFailure(w, r, "lookup", node.UUID, err)
		}
		return
	}
	writeJSON(w, http.StatusOK, h.lookupAnswer(r, node, candidate, created))
}

// lookupAnswer builds the answer lookup gives (and continue_inspection from
// API 1.84): the node with secrets masked and the config section carrying
// the token when it was just created, else "******".
func (h *Handler) lookupAnswer(r *http.Request, node Node, candidate string, created bool) LookupResponse {
	token := MaskedToken
	if created {
		token = candidate
	}
	cfg := h.lookup
	cfg.HeartbeatTimeout = int(h.cfg.HeartbeatTimeout / time.Second)
	cfg.AgentToken = token
	cfg.AgentTokenRequired = true
	cfg.AgentSkipBMCDetect = node.ManagementInterface == "redfish" || node.ManagementInterface == "idrac-redfish"
	dii := MaskSecrets(node.DriverInternalInfo)
	if created {
		dii[driver.InternalAgentToken] = MaskedToken
	}
	base := h.baseURL(r)
	return LookupResponse{
		Node: LookupNode{
			UUID:               node.UUID,
			Properties:         nonNil(node.Properties),
			InstanceInfo:       maskInstanceInfo(node.InstanceInfo),
			DriverInternalInfo: dii,
			Links: []Link{
				{Href: base + "/v1/nodes/" + node.UUID, Rel: "self"},
				{Href: base + "/nodes/" + node.UUID, Rel: "bookmark"},
			},
		},
		Config: cfg,
	}
}

func nonNil(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// maskInstanceInfo masks instance_info as Ironic does for API output:
// secrets, and configdrive and image_url always.
func maskInstanceInfo(m map[string]any) map[string]any {
	out := MaskSecrets(m)
	for _, k := range []string{"configdrive", "image_url"} {
		if _, ok := out[k]; ok {
			out[k] = MaskedToken
		}
	}
	return out
}

func (h *Handler) backendFailure(w http.ResponseWriter, r *http.Request, op, node string, err error) {
	h.log.LogAttrs(r.Context(), slog.LevelWarn, "agentclient: backend failed", slog.String("op", op), slog.String("node", node), slog.Any("error", err))
	writeIronicError(w, http.StatusInternalServerError, "Internal error while processing the request.")
}

// HeartbeatRequest is the JSON body of POST /v1/heartbeat/{node_ident}.
// Absent and null fields are nil.
type HeartbeatRequest struct {
	CallbackURL        *string `json:"callback_url,omitempty"`
	AgentToken         *string `json:"agent_token,omitempty"`
	AgentVersion       *string `json:"agent_version,omitempty"`
	AgentVerifyCA      *string `json:"agent_verify_ca,omitempty"`
	AgentStatus        *string `json:"agent_status,omitempty"`
	AgentStatusMessage *string `json:"agent_status_message,omitempty"`
}

// heartbeatFields are the keys of a heartbeat body, matched exactly.
var heartbeatFields = map[string]bool{
	"callback_url": true, "agent_token": true, "agent_version": true,
	"agent_verify_ca": true, "agent_status": true, "agent_status_message": true,
}

// DecodeHeartbeatRequest parses a heartbeat body strictly: one JSON object,
// string (or null) fields only, no unknown fields, nothing after it. Keys
// match exactly, as Ironic's JSON does: encoding/json alone would take
// "CALLBACK_URL" for callback_url.
func DecodeHeartbeatRequest(body []byte) (HeartbeatRequest, error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(body, &keys); err == nil {
		for k := range keys {
			if !heartbeatFields[k] {
				return HeartbeatRequest{}, fmt.Errorf("%w: heartbeat body: unknown field %q", ErrInvalidArgument, truncateForLog(k))
			}
		}
	}
	var req HeartbeatRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return HeartbeatRequest{}, fmt.Errorf("%w: heartbeat body: %v", ErrInvalidArgument, err)
	}
	if dec.More() {
		return HeartbeatRequest{}, fmt.Errorf("%w: heartbeat body: trailing data after the JSON object", ErrInvalidArgument)
	}
	if bytes.HasPrefix(bytes.TrimSpace(body), []byte("null")) {
		return HeartbeatRequest{}, fmt.Errorf("%w: heartbeat body: expected a JSON object, got null", ErrInvalidArgument)
	}
	return req, nil
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// validCallbackURL reports whether u is an absolute http(s) URL with a host.
func validCallbackURL(s string) bool {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.User != nil {
		return false
	}
	return u.Scheme == "http" || u.Scheme == "https"
}

// parseCertificatePEM checks that s holds at least one PEM certificate.
func parseCertificatePEM(s string) error {
	block, _ := pem.Decode([]byte(s))
	if block == nil || block.Type != "CERTIFICATE" {
		return errors.New("no PEM CERTIFICATE block")
	}
	_, err := x509.ParseCertificate(block.Bytes)
	return err
}

// serveHeartbeat implements POST /v1/heartbeat/{node_ident}. The checks run
// in Ironic's order: API-side ones first, then the conductor's.
func (h *Handler) serveHeartbeat(w http.ResponseWriter, r *http.Request) {
	ident := r.PathValue("node_ident")
	if h.cfg.DisableRamdiskEndpoints {
		h.refuse(w, r, http.StatusForbidden, ident, "Ramdisk endpoints are disabled.")
		return
	}
	ver, ok := h.negotiate(w, r)
	if !ok {
		return
	}
	if ver.Less(versionRamdiskEndpoints) {
		h.refuse(w, r, http.StatusNotFound, ident, "The resource could not be found.")
		return
	}
	if !validNodeIdent(ident) {
		ident = truncateForLog(ident)
		h.refuse(w, r, http.StatusBadRequest, ident, fmt.Sprintf("Expected a logical name or UUID but received %q.", ident))
		return
	}
	body, err := readBody(w, r, maxBodyBytes)
	if err != nil {
		if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
			h.refuse(w, r, http.StatusRequestEntityTooLarge, ident, fmt.Sprintf("The heartbeat body is larger than the %d bytes allowed.", maxBodyBytes))
			return
		}
		h.refuse(w, r, http.StatusBadRequest, ident, "The heartbeat body could not be read.")
		return
	}
	req, err := DecodeHeartbeatRequest(body)
	if err != nil {
		h.refuse(w, r, http.StatusBadRequest, ident, "Invalid heartbeat body: expected a JSON object with string fields callback_url, agent_token, agent_version, agent_verify_ca, agent_status, agent_status_message.")
		return
	}
	for _, f := range []struct {
		name string
		val  *string
		min  APIVersion
	}{
		{"agent_version", req.AgentVersion, versionAgentVersion},
		{"agent_token", req.AgentToken, versionAgentToken},
		{"agent_verify_ca", req.AgentVerifyCA, versionAgentVerifyCA},
		{"agent_status", req.AgentStatus, versionAgentStatus},
		{"agent_status_message", req.AgentStatusMessage, versionAgentStatus},
	} {
		if f.val != nil && ver.Less(f.min) {
			h.refuse(w, r, http.StatusBadRequest, ident, fmt.Sprintf("Field %s requires API version %s or newer; the request used %s.", f.name, f.min, ver))
			return
		}
	}
	if req.CallbackURL == nil {
		h.refuse(w, r, http.StatusBadRequest, ident, "Missing argument: callback_url.")
		return
	}
	callback := *req.CallbackURL
	if callback == "" && req.AgentStatus == nil || callback != "" && !validCallbackURL(callback) {
		h.refuse(w, r, http.StatusBadRequest, ident, fmt.Sprintf("Invalid callback_url %q: expected an absolute http or https URL.", callback))
		return
	}
	if req.AgentStatus != nil {
		switch *req.AgentStatus {
		case "start", "end", "error":
		default:
			h.refuse(w, r, http.StatusBadRequest, ident, fmt.Sprintf("Unknown agent_status %q: expected one of start, end, error.", *req.AgentStatus))
			return
		}
	}
	node, err := h.backend.GetNode(r.Context(), ident)
	if err != nil {
		if errors.Is(err, ErrNodeNotFound) {
			h.refuse(w, r, http.StatusNotFound, ident, fmt.Sprintf("Node %s could not be found.", ident))
			return
		}
		h.backendFailure(w, r, "heartbeat", ident, err)
		return
	}
	if node.AgentURL != "" && callback != node.AgentURL {
		h.refuse(w, r, http.StatusBadRequest, node.UUID, "Agent callback URL changed unexpectedly; refusing the heartbeat.")
		return
	}
	if req.AgentToken == nil || *req.AgentToken == "" {
		h.refuse(w, r, http.StatusBadRequest, node.UUID, "Agent token is required for heartbeat processing.")
		return
	}
	// Conductor-side checks.
	if req.AgentVersion == nil && req.AgentStatus == nil {
		h.refuse(w, r, http.StatusBadRequest, node.UUID, "Heartbeat carries no agent_version; upgrade the agent.")
		return
	}
	if !TokensEqual(node.AgentToken, *req.AgentToken) {
		h.refuse(w, r, http.StatusBadRequest, node.UUID, "Invalid or missing agent token received.")
		return
	}
	if !h.cfg.AllowInsecureCallback && callback != "" && !strings.HasPrefix(callback, "https://") {
		h.refuse(w, r, http.StatusBadRequest, node.UUID, "TLS is required by the conductor but the agent callback URL does not use https.")
		return
	}
	ca := str(req.AgentVerifyCA)
	switch {
	case ca == "" || ca == node.AgentVerifyCA:
		// Nothing new to pin (the pinned certificate was parsed when it
		// was first accepted).
	case node.AgentVerifyCA != "" && strings.TrimSpace(node.AgentVerifyCA) != strings.TrimSpace(ca):
		h.refuse(w, r, http.StatusBadRequest, node.UUID, "Agent certificate differs from the one pinned for this node; refusing the heartbeat.")
		return
	default:
		if err := parseCertificatePEM(ca); err != nil {
			h.refuse(w, r, http.StatusBadRequest, node.UUID, "agent_verify_ca is not a PEM certificate.")
			return
		}
	}
	if node.AgentURL == "" && node.Reservation != "" {
		h.refuse(w, r, http.StatusConflict, node.UUID, fmt.Sprintf("Node %s is locked by host %s, please retry after the current operation is completed.", node.UUID, node.Reservation))
		return
	}
	hb := Heartbeat{
		NodeUUID:           node.UUID,
		CallbackURL:        callback,
		AgentVersion:       str(req.AgentVersion),
		AgentVerifyCA:      ca,
		AgentStatus:        str(req.AgentStatus),
		AgentStatusMessage: str(req.AgentStatusMessage),
		ReceivedAt:         h.clock.Now().UTC(),
		AgentToken:         *req.AgentToken,
	}
	if err := h.backend.RecordHeartbeat(r.Context(), hb); err != nil {
		switch {
		case errors.Is(err, ErrNodeLocked):
			h.refuse(w, r, http.StatusConflict, node.UUID, fmt.Sprintf("Node %s is locked, please retry after the current operation is completed.", node.UUID))
		case errors.Is(err, ErrNodeNotFound):
			h.refuse(w, r, http.StatusNotFound, node.UUID, fmt.Sprintf("Node %s could not be found.", ident))
		case errors.Is(err, context.Canceled):
			h.refuse(w, r, http.StatusServiceUnavailable, node.UUID, "The request was cancelled.")
		default:
			h.backendFailure(w, r, "heartbeat", node.UUID, err)
		}
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

var _ http.Handler = (*Handler)(nil)

// readBody reads a request body of at most limit bytes. A body announced
// (Content-Length) larger than limit is refused with an *http.MaxBytesError
// before a byte of it is read. Otherwise the body is read through
// http.MaxBytesReader into a buffer that grows with the bytes actually
// received, never with the announced length: a client announcing 4 MiB
// and sending one byte holds a few hundred bytes, not 4 MiB, for as long
// as the server's read timeout lets it wait. A chunked body that grows past
// limit ends with an *http.MaxBytesError too.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		// The body is never read, so the connection cannot carry another
		// request: close it once the answer is sent, and end reading now
		// so the server does not first drain (up to 256 KiB of) what the
		// client keeps sending. A ResponseWriter without deadlines (a
		// test recorder) has no connection to drain.
		w.Header().Set("Connection", "close")
		_ = http.NewResponseController(w).SetReadDeadline(time.Now())
		return nil, &http.MaxBytesError{Limit: limit}
	}
	return io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
}
