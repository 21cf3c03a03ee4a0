package ironicapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/driver"
	"github.com/google/uuid"
)

// Default request bounds.
const (
	// DefaultMaxBodyBytes bounds a request body, as oslo.middleware's
	// max_request_body_size bounds Ironic's (Ironic's default is 112 KiB;
	// node documents with large properties need more).
	DefaultMaxBodyBytes = 1 << 20
	// DefaultMaxProvisionBodyBytes bounds the body of PUT
	// /v1/nodes/{node}/states/provision, which carries a config drive of up
	// to 64 MiB gzipped, base64-encoded.
	DefaultMaxProvisionBodyBytes = 96 << 20
)

// Authenticator decides whether a request may use the API. It returns nil
// to let it through, or an error (an *Error with 401 to ask for
// credentials) to refuse it. Options.Auth nil means Ironic's noauth.
type Authenticator interface {
	Authenticate(r *http.Request) error
}

// Options configures a Handler.
type Options struct {
	// Conductor executes every write and answers every read. Required.
	Conductor *conductor.Conductor
	// Drivers is the registry the conductor composes drivers from, for
	// /v1/drivers. Required.
	Drivers *driver.Registry
	// Agent, when set, serves the ramdisk endpoints (/v1/lookup,
	// /v1/heartbeat/{node}, /v1/continue_inspection) on the same
	// listener, as Ironic does; typically an agentclient.Handler.
	Agent http.Handler
	// Auth authenticates every request but the root, the version document
	// and the ramdisk endpoints (which have their agent tokens). nil is
	// noauth.
	Auth Authenticator
	// PublicURL is the base of the links in responses
	// ("https://bm.example.com:6385"); empty takes the request's scheme
	// and Host, as Ironic does without [api]public_endpoint.
	PublicURL string
	// MaxBodyBytes bounds request bodies (DefaultMaxBodyBytes when zero);
	// MaxProvisionBodyBytes bounds provision requests carrying config
	// drives (DefaultMaxProvisionBodyBytes when zero).
	MaxBodyBytes          int64
	MaxProvisionBodyBytes int64
	// MaxInFlightBodyBytes bounds the bytes of all the bodies being read
	// at once, the ramdisk endpoints' included
	// (DefaultMaxInFlightBodyBytes when zero): a body counts three times
	// its announced size (what decoding it holds), or its endpoint's
	// limit, a body heavier than the budget all of it. A request that finds no
	// room waits up to BodyBudgetWait (DefaultBodyBudgetWait when zero)
	// and then gets 503 with Retry-After.
	MaxInFlightBodyBytes int64
	BodyBudgetWait       time.Duration
	// TempDir is where a provision request's configdrive string is
	// spooled while the request runs (os.TempDir() when empty); the
	// file is removed before the answer is written.
	TempDir string
	// Logger receives one line per failed request; nil discards.
	Logger *slog.Logger
}

// Handler is Ironic's REST API v1 as an http.Handler, on top of a
// conductor. Build it with New and mount it at the root of a listener.
type Handler struct {
	opts  Options
	c     *conductor.Conductor
	store baremetal.Store
	mux   *http.ServeMux
	log   *slog.Logger
	// budget bounds the bodies in flight.
	budget *bodyBudget
}

// New builds the handler.
func New(o Options) (*Handler, error) {
	if o.Conductor == nil {
		return nil, errors.New("ironicapi: Options.Conductor is required")
	}
	if o.Drivers == nil {
		return nil, errors.New("ironicapi: Options.Drivers is required")
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.MaxProvisionBodyBytes <= 0 {
		o.MaxProvisionBodyBytes = DefaultMaxProvisionBodyBytes
	}
	if o.MaxInFlightBodyBytes <= 0 {
		o.MaxInFlightBodyBytes = DefaultMaxInFlightBodyBytes
	}
	if o.BodyBudgetWait <= 0 {
		o.BodyBudgetWait = DefaultBodyBudgetWait
	}
	o.PublicURL = strings.TrimRight(o.PublicURL, "/")
	h := &Handler{opts: o, c: o.Conductor, store: o.Conductor.Store(), mux: http.NewServeMux(), log: o.Logger,
		budget: newBodyBudget(o.MaxInFlightBodyBytes, o.BodyBudgetWait)}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.routes()
	return h, nil
}

// handlerFunc serves one route. It writes the response through the
// request's reply methods, or returns an error that is written as
// Ironic's error body (toError maps it).
type handlerFunc func(rq *request) error

// route options.
type route struct {
	// minVersion is the first microversion the route exists in; below it
	// the route answers 404 as Ironic's unversioned controllers do.
	minVersion int
	// public routes need no authentication (the root documents).
	public bool
	// maxBody overrides the handler's body bound.
	maxBody int64
}

// handle registers fn for pattern ("GET /v1/nodes/{node}").
func (h *Handler) handle(pattern string, rt route, fn handlerFunc) {
	h.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		h.serve(w, r, rt, fn)
	})
}

// authenticate checks r with Options.Auth and answers a refused request
// (401 with WWW-Authenticate, as Ironic does), reporting whether r may
// go on.
func (h *Handler) authenticate(w http.ResponseWriter, r *http.Request) bool {
	if h.opts.Auth == nil {
		return true
	}
	err := h.opts.Auth.Authenticate(r)
	if err == nil {
		return true
	}
	e := toError(err)
	if e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Basic realm="Baremetal API"`)
	}
	writeError(w, e)
	return false
}

// Protect puts next behind the API's authentication: a request
// Options.Auth refuses gets the answer the API gives it, and only the
// others reach next. An embedder serving more than the API on the same
// listener (a web UI, the consoles' pages) wraps them with it, so that
// one set of credentials guards them all.
func (h *Handler) Protect(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.authenticate(w, r) {
			next.ServeHTTP(w, r)
		}
	})
}

// headerRequestID is oslo.middleware's request id header, set on every
// response as Ironic does.
const headerRequestID = "X-OpenStack-Request-Id"

func (h *Handler) serve(w http.ResponseWriter, r *http.Request, rt route, fn handlerFunc) {
	hdr := w.Header()
	reqID := "req-" + uuid.NewString()
	hdr.Set(headerRequestID, reqID)
	hdr.Set(headerMinVersion, MinVersion.String())
	hdr.Set(headerMaxVersion, MaxVersion.String())
	v, verr := requestedVersion(r.Header)
	if verr != nil {
		writeError(w, verr)
		return
	}
	hdr.Set(headerVersion, v.String())
	hdr.Set(headerAPIVersion, apiVersionService+" "+v.String())
	hdr.Add("Vary", headerVersion)
	if !rt.public && !h.authenticate(w, r) {
		return
	}
	if rt.minVersion > 0 && !v.AtLeast(rt.minVersion) {
		writeError(w, notFound("The requested resource could not be found."))
		return
	}
	limit := h.opts.MaxBodyBytes
	if rt.maxBody > 0 {
		limit = rt.maxBody
	}
	// Only an authenticated request gets here: a size announced over
	// the endpoint's limit is refused unread, and the body counts
	// against the listener's budget while the request runs.
	if r.ContentLength > limit {
		writeError(w, tooLarge(limit))
		return
	}
	release, berr := h.budget.acquire(r.Context(), bodyWeight(r, limit))
	if berr != nil {
		writeError(w, berr)
		return
	}
	defer release()
	setBodyDeadline(w, r, limit)
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	rq := &request{h: h, w: w, r: r, ctx: r.Context(), v: v}
	if err := fn(rq); err != nil {
		e := toError(err)
		if e.Status >= 500 {
			h.log.Error("ironicapi: request failed", "method", r.Method, "path", r.URL.Path, "status", e.Status,
				"request_id", reqID, "err", baremetal.MaskText(e.Message))
			if e.internal {
				e = &Error{Status: e.Status, RetryAfter: e.RetryAfter, Message: fmt.Sprintf(genericServerError, reqID)}
			}
		} else if e.detail != "" {
			// The client reads Ironic's wording; the operator gets the
			// library's error with its context.
			h.log.Info("ironicapi: request refused", "method", r.Method, "path", r.URL.Path, "status", e.Status,
				"request_id", reqID, "err", baremetal.MaskText(e.detail))
		}
		if !rq.wrote {
			writeError(w, e)
		}
	}
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// python-ironicclient lists with filters at "/v1/nodes/?..." and
	// "/v1/ports/?...": Ironic's pecan routes a trailing slash as if it
	// were absent, so one is dropped here (the version document keeps
	// its own route for "/v1/").
	if p := r.URL.Path; len(p) > 1 && p != "/v1/" && strings.HasSuffix(p, "/") {
		u := *r.URL
		u.Path = strings.TrimSuffix(p, "/")
		u.RawPath = strings.TrimSuffix(u.RawPath, "/")
		r2 := *r
		r2.URL = &u
		r = &r2
	}
	// Ironic's root controller serves a path whose first element is not
	// a version as v1 ("/nodes/x" is "/v1/nodes/x"): the bookmark links
	// have that form, and ironic-tempest-plugin's client sends some
	// requests so.
	if p := r.URL.Path; p != "/" && p != "/v1" && !strings.HasPrefix(p, "/v1/") {
		u := *r.URL
		u.Path = "/v1" + p
		if u.RawPath != "" {
			u.RawPath = "/v1" + u.RawPath
		}
		r2 := *r
		r2.URL = &u
		r = &r2
	}
	if h.opts.Agent != nil && isRamdiskPath(r.URL.Path) {
		h.serveAgent(w, r)
		return
	}
	h.mux.ServeHTTP(w, r)
}

func isRamdiskPath(p string) bool {
	return p == "/v1/lookup" || p == "/v1/continue_inspection" || strings.HasPrefix(p, "/v1/heartbeat/")
}

// request is one request being served.
type request struct {
	h     *Handler
	w     http.ResponseWriter
	r     *http.Request
	ctx   context.Context
	v     Version
	wrote bool
}

// decode reads the JSON body into dst as a stream (the body is never
// held whole beside its decoded form). Numbers keep their exact text
// (json.Number) inside maps. An empty body, malformed JSON, an oversized
// body or trailing data is a 400 (413 for oversized).
func (rq *request) decode(dst any) error {
	dec := json.NewDecoder(rq.r.Body)
	dec.UseNumber()
	readErr := func(err error) error {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return tooLarge(mbe.Limit)
		}
		return nil
	}
	if err := dec.Decode(dst); err != nil {
		if e := readErr(err); e != nil {
			return e
		}
		if errors.Is(err, io.EOF) {
			return badRequest("The request body is empty; a JSON document was expected.")
		}
		return badRequest("Invalid JSON in the request body: %v", err)
	}
	// Only white space may follow the document.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		if e := readErr(err); e != nil {
			return e
		}
		return badRequest("Invalid JSON in the request body: data after the document.")
	}
	return nil
}

// reply writes body as JSON with status.
func (rq *request) reply(status int, body any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("ironicapi: encode response: %w", err)
	}
	rq.wrote = true
	rq.w.Header().Set("Content-Type", "application/json")
	rq.w.WriteHeader(status)
	_, _ = rq.w.Write(data)
	return nil
}

// status writes an empty response (204, 202).
func (rq *request) status(code int) error {
	rq.wrote = true
	rq.w.WriteHeader(code)
	return nil
}

// baseURL is the public URL links are made from.
func (rq *request) baseURL() string {
	if rq.h.opts.PublicURL != "" {
		return rq.h.opts.PublicURL
	}
	scheme := "http"
	if rq.r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + rq.r.Host
}

// Link is one entry of a resource's "links".
type Link struct {
	Href string `json:"href"`
	Rel  string `json:"rel"`
	Type string `json:"type,omitempty"`
}

// links are Ironic's self and bookmark links of resource/args
// ("nodes", "<uuid>"): self under /v1, bookmark without it.
func (rq *request) links(resource, args string) []Link {
	base := rq.baseURL()
	return []Link{
		{Href: base + "/v1/" + resource + "/" + args, Rel: "self"},
		{Href: base + "/" + resource + "/" + args, Rel: "bookmark"},
	}
}

// routes registers every endpoint. Each group of endpoints lives in its
// own file and registers itself here.
func (h *Handler) routes() {
	h.handle("GET /{$}", route{public: true}, h.getRoot)
	h.handle("GET /v1", route{public: true}, h.getV1)
	h.handle("GET /v1/{$}", route{public: true}, h.getV1)
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		h.serve(w, r, route{public: true}, func(*request) error {
			return notFound("The resource could not be found.")
		})
	})
	h.nodeRoutes()
	h.nodeSyncRoutes()
	h.portgroupRoutes()
	h.allocationRoutes()
	h.deployTemplateRoutes()
	h.runbookRoutes()
	h.portRoutes()
	h.chassisRoutes()
	h.volumeRoutes()
	h.vifRoutes()
	h.driverRoutes()
	h.conductorRoutes()
}
