package rfdriver

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stmcginnis/gofish/common"

	"github.com/anvilmetal/anvil/driver"
)

// ErrAuth is wrapped when the BMC rejects the credentials.
var ErrAuth = errors.New("authentication failed")

// ErrUnavailable is wrapped when the BMC keeps failing with 5xx answers
// after every retry, or cannot be reached.
var ErrUnavailable = errors.New("BMC unavailable")

// HTTPError is a non-successful Redfish answer. It names the request and
// the BMC's message, never credentials.
type HTTPError struct {
	Method    string
	URI       string
	Status    int
	MessageID string
	Message   string
}

func (e *HTTPError) Error() string {
	msg := fmt.Sprintf("redfish: %s %s: HTTP %d", e.Method, e.URI, e.Status)
	if e.MessageID != "" {
		msg += " " + e.MessageID
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// Is makes errors.Is match ErrAuth for 401 and ErrUnavailable for 5xx.
func (e *HTTPError) Is(target error) bool {
	return (target == ErrAuth && e.Status == http.StatusUnauthorized) ||
		(target == ErrUnavailable && e.Status >= 500)
}

// Options tunes a Pool. Zero values take the documented defaults.
type Options struct {
	// MaxConcurrentPerBMC caps requests in flight to one BMC (default 2).
	MaxConcurrentPerBMC int
	// CallTimeout bounds one HTTP request inside the caller's context
	// (default 30 s).
	CallTimeout time.Duration
	// Retries is how many times a 5xx answer or a connection error is
	// retried (default 3).
	Retries int
	// BackoffBase is the first backoff; it doubles per retry with jitter
	// (default 500 ms).
	BackoffBase time.Duration
	// MaxConnections caps cached BMC connections; the least recently used
	// one is logged out beyond it (default 1024).
	MaxConnections int
	// Sleep waits d or until ctx is done; tests inject a fast one.
	Sleep func(ctx context.Context, d time.Duration) error
	// RootCAs, when set, replaces the system pool for verification (used
	// by tests with a self-signed BMC certificate).
	RootCAs *x509.CertPool
	// PowerTimeout bounds waiting for a power state change (default 60 s,
	// Ironic's power_state_change_timeout).
	PowerTimeout time.Duration
	// PollInterval is how often power state and tasks are polled
	// (default 1 s).
	PollInterval time.Duration
	// Logger receives debug lines; nil means slog.Default(), as everywhere
	// an embedder configures logging. Passwords are never logged.
	Logger *slog.Logger
	// Media publishes the per-node boot ISO (the deploy ISO re-mastered
	// with the node's kernel parameters) and, with driver_info
	// config_via_removable, the parameters image that the
	// redfish-virtual-media boot interface inserts (see
	// VirtualMediaBoot.PrepareRamdisk); nil means the deploy ISO is
	// inserted as it is, and must carry the parameters itself.
	Media MediaStore
	// MaxDeployISOSize refuses a deploy ISO larger than this many bytes
	// before it is re-mastered (default DefaultMaxDeployISOSize, 2 GiB).
	MaxDeployISOSize int64
	// DeployISOFetchTimeout bounds one download of a deploy ISO (default
	// DefaultDeployISOFetchTimeout, 10 min).
	DeployISOFetchTimeout time.Duration
	// DeployISOCacheDir keeps downloaded deploy ISOs and re-master
	// scratch space; "" means a private temporary directory that
	// Drivers.Close removes.
	DeployISOCacheDir string
	// BootLoaders build the boot ISO from driver_info deploy_kernel and
	// deploy_ramdisk (and a ramdisk deploy's instance_info kernel and
	// ramdisk) when no deploy ISO is named: see BuildBootISO. The zero
	// value means DefaultBootLoaders() (Debian's, those installed).
	BootLoaders BootLoaders
	// KernelAppendParams are the ramdisk kernel parameters put before
	// the conductor's on the boot ISO's kernel lines when driver_info
	// kernel_append_params is unset (Ironic's [redfish]
	// kernel_append_params).
	KernelAppendParams string
}

func (o *Options) defaults() {
	if o.MaxConcurrentPerBMC <= 0 {
		o.MaxConcurrentPerBMC = 2
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 30 * time.Second
	}
	if o.Retries < 0 {
		o.Retries = 0
	} else if o.Retries == 0 {
		o.Retries = 3
	}
	if o.BackoffBase <= 0 {
		o.BackoffBase = 500 * time.Millisecond
	}
	if o.MaxConnections <= 0 {
		o.MaxConnections = 1024
	}
	if o.Sleep == nil {
		o.Sleep = sleepCtx
	}
	if o.PowerTimeout <= 0 {
		o.PowerTimeout = 60 * time.Second
	}
	if o.PollInterval <= 0 {
		o.PollInterval = time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.MaxDeployISOSize <= 0 {
		o.MaxDeployISOSize = DefaultMaxDeployISOSize
	}
	if o.DeployISOFetchTimeout <= 0 {
		o.DeployISOFetchTimeout = DefaultDeployISOFetchTimeout
	}
	if o.BootLoaders == (BootLoaders{}) {
		o.BootLoaders = DefaultBootLoaders()
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Pool keeps one connection (and at most one Redfish session) per BMC and
// credentials, shared by every node on that BMC. It is safe for
// concurrent use. Close logs every session out.
type Pool struct {
	opts  Options
	mu    sync.Mutex
	conns map[string]*Conn
	order []string // least recently used first
	// sems holds one request slot set per BMC endpoint, shared by every
	// connection to it (nodes with different credentials on one BMC
	// still share its limit).
	sems map[string]chan struct{}
	// salt keys the password's HMAC in connection keys (see Info.key).
	salt []byte
}

// NewPool returns an empty pool.
func NewPool(opts Options) *Pool {
	opts.defaults()
	salt := make([]byte, 32)
	_, _ = crand.Read(salt)
	return &Pool{opts: opts, conns: map[string]*Conn{}, sems: map[string]chan struct{}{}, salt: salt}
}

// Conn returns the shared connection for info, creating it on first use.
// It does not contact the BMC.
func (p *Pool) Conn(info Info) (*Conn, error) {
	// The system is the node's, not the connection's: strip it so that no
	// caller can mistake the first node's system for its own.
	info.SystemID = ""
	k := info.key(p.salt)
	p.mu.Lock()
	if c, ok := p.conns[k]; ok {
		p.touch(k)
		p.mu.Unlock()
		return c, nil
	}
	sem, ok := p.sems[info.Endpoint]
	if !ok {
		sem = make(chan struct{}, p.opts.MaxConcurrentPerBMC)
		p.sems[info.Endpoint] = sem
	}
	p.mu.Unlock()
	c, err := newConn(info, p.opts, sem)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	if existing, ok := p.conns[k]; ok {
		p.touch(k)
		p.mu.Unlock()
		return existing, nil
	}
	p.conns[k] = c
	p.order = append(p.order, k)
	var evicted *Conn
	if len(p.order) > p.opts.MaxConnections {
		evicted = p.conns[p.order[0]]
		delete(p.conns, p.order[0])
		p.order = p.order[1:]
	}
	p.mu.Unlock()
	if evicted != nil {
		ctx, cancel := context.WithTimeout(context.Background(), p.opts.CallTimeout)
		_ = evicted.Logout(ctx)
		cancel()
	}
	return c, nil
}

func (p *Pool) touch(k string) {
	for i, o := range p.order {
		if o == k {
			p.order = append(append(p.order[:i:i], p.order[i+1:]...), k)
			return
		}
	}
}

// Close logs out every session and forgets every connection. The first
// logout error is returned; all are attempted.
func (p *Pool) Close(ctx context.Context) error {
	p.mu.Lock()
	conns := p.conns
	p.conns, p.order = map[string]*Conn{}, nil
	p.mu.Unlock()
	var first error
	for _, c := range conns {
		if err := c.Logout(ctx); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Conn is one BMC's connection: an HTTP client, a concurrency limit and
// the session. Requests go through Client, bound to a caller's context.
type Conn struct {
	info Info
	opts Options
	http *http.Client
	sem  chan struct{}

	authMu     sync.Mutex
	token      string
	sessionURI string
	generation int  // bumped on every login, so concurrent 401s log in once
	basic      bool // session service unavailable under auth_type auto
	// rootRead says the service root was read for its session link;
	// loginURI is that link (empty: the standard path).
	rootRead bool
	loginURI string

	sysMu     sync.Mutex
	systemURI string // the only system, once found (for nodes without redfish_system_id)
}

func newConn(info Info, opts Options, sem chan struct{}) (*Conn, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = opts.MaxConcurrentPerBMC
	tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: !info.VerifyCA} //nolint:gosec // the operator's choice via redfish_verify_ca
	if info.VerifyCA {
		pool := opts.RootCAs
		if info.CAPath != "" {
			var err error
			if pool, err = loadCAs(info.CAPath); err != nil {
				return nil, err
			}
		}
		tr.TLSClientConfig.RootCAs = pool
	}
	return &Conn{
		info: info, opts: opts,
		http: &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		sem:  sem,
	}, nil
}

func loadCAs(path string) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	files := []string{path}
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		files, _ = filepath.Glob(filepath.Join(path, "*"))
	}
	added := false
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil && pool.AppendCertsFromPEM(b) {
			added = true
		}
	}
	if !added {
		return nil, &driver.InvalidParameterError{Field: "driver_info", Key: "redfish_verify_ca", Expected: "a file or directory holding PEM certificates"}
	}
	return pool, nil
}

// Info returns the validated driver_info the connection was made for.
func (c *Conn) Info() Info { return c.info }

// Client returns a gofish client whose every request runs inside ctx,
// with the connection's limit, retries, timeout and re-login.
func (c *Conn) Client(ctx context.Context) common.Client { return &callClient{c: c, ctx: ctx} }

// Logout deletes the session, if any. It is safe to call more than once.
func (c *Conn) Logout(ctx context.Context) error {
	c.authMu.Lock()
	tok, uri := c.token, c.sessionURI
	c.token, c.sessionURI = "", ""
	c.authMu.Unlock()
	defer c.http.CloseIdleConnections()
	if tok == "" || uri == "" {
		return nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, c.url(uri), nil)
	if err != nil {
		return fmt.Errorf("redfish: logout: %w", err)
	}
	req.Header.Set("X-Auth-Token", tok)
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("redfish: logout %s: %w", c.info.Endpoint, scrub(err))
	}
	defer drain(resp)
	if resp.StatusCode >= 300 && resp.StatusCode != http.StatusNotFound {
		return c.httpError(http.MethodDelete, uri, resp)
	}
	return nil
}

func (c *Conn) url(uri string) string {
	if strings.HasPrefix(uri, "http://") || strings.HasPrefix(uri, "https://") {
		return uri
	}
	return c.info.Endpoint + uri
}

// ensureAuth logs in when the connection uses sessions and has none, or
// when the session of generation gen was rejected.
func (c *Conn) ensureAuth(ctx context.Context, rejectedGen int) (int, error) {
	if c.info.Username == "" || c.info.AuthType == AuthBasic {
		return 0, nil
	}
	c.authMu.Lock()
	defer c.authMu.Unlock()
	if c.basic {
		return c.generation, nil
	}
	if c.token != "" && c.generation != rejectedGen {
		return c.generation, nil
	}
	if !c.rootRead {
		offered, uri, err := c.readRoot(ctx)
		if err == nil {
			c.rootRead, c.loginURI = true, uri
			if !offered && c.info.AuthType == AuthAuto {
				// The service root names no session service (sushy-tools
				// is such a BMC): HTTP Basic it is, without trying a login
				// the BMC would refuse.
				c.basic = true
				c.opts.Logger.Debug("redfish: no session service in the service root, using basic", "bmc", c.info.Endpoint)
				return c.generation, nil
			}
		}
	}
	tok, uri, err := c.login(ctx)
	if err != nil {
		var he *HTTPError
		if c.info.AuthType == AuthAuto && errors.As(err, &he) && (he.Status == http.StatusNotFound || he.Status == http.StatusMethodNotAllowed || he.Status == http.StatusNotImplemented) {
			c.basic = true
			return c.generation, nil
		}
		if c.info.AuthType == AuthAuto && errors.Is(err, ErrAuth) {
			// A BMC without a working session service may refuse the
			// session POST with 401 although the credentials are right
			// (sushy-tools answers 401 to a POST without Basic
			// credentials). Only a 401 to Basic as well means bad
			// credentials.
			if berr := c.probeBasic(ctx); berr != nil {
				return 0, berr
			}
			c.basic = true
			c.opts.Logger.Debug("redfish: session login refused but basic accepted, using basic", "bmc", c.info.Endpoint)
			return c.generation, nil
		}
		return 0, err
	}
	c.token, c.sessionURI = tok, uri
	c.generation++
	c.opts.Logger.Debug("redfish: session created", "bmc", c.info.Endpoint, "user", c.info.Username)
	return c.generation, nil
}

// readRoot reads the service root (which needs no authentication) and
// reports whether it offers sessions (Links.Sessions or SessionService)
// and the sessions collection to log in at.
func (c *Conn) readRoot(ctx context.Context) (offered bool, loginURI string, err error) {
	resp, err := c.direct(ctx, http.MethodGet, "/redfish/v1/", false)
	if err != nil {
		return false, "", err
	}
	defer drain(resp)
	if resp.StatusCode != http.StatusOK {
		return false, "", c.httpError(http.MethodGet, "/redfish/v1/", resp)
	}
	var m map[string]any
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&m); err != nil {
		return false, "", fmt.Errorf("redfish: GET /redfish/v1/ on %s: decode: %w", c.info.Endpoint, err)
	}
	loginURI = link(getMap(m, "Links"), "Sessions")
	if !strings.HasPrefix(loginURI, "/") {
		loginURI = ""
	}
	return loginURI != "" || link(m, "SessionService") != "", loginURI, nil
}

// probeBasic checks the credentials with one HTTP Basic GET of the
// systems collection: nil when accepted, ErrAuth when refused.
func (c *Conn) probeBasic(ctx context.Context) error {
	resp, err := c.direct(ctx, http.MethodGet, "/redfish/v1/Systems", true)
	if err != nil {
		return fmt.Errorf("redfish: basic authentication check on %s: %w: %w", c.info.Endpoint, ErrUnavailable, err)
	}
	defer drain(resp)
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("redfish: %s refused user %q with both a session login and HTTP Basic: %w", c.info.Endpoint, c.info.Username, ErrAuth)
	case resp.StatusCode >= 300:
		return c.httpError(http.MethodGet, "/redfish/v1/Systems", resp)
	}
	return nil
}

// direct sends one request outside the retrying client (which would
// recurse into authentication), with the BMC's limit and the call
// timeout, and HTTP Basic when basic is set. The caller drains the answer.
func (c *Conn) direct(ctx context.Context, method, uri string, basic bool) (*http.Response, error) {
	cctx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
	req, err := http.NewRequestWithContext(cctx, method, c.url(uri), nil)
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if basic {
		req.SetBasicAuth(c.info.Username, c.info.Password)
	}
	if err := c.acquire(ctx); err != nil {
		cancel()
		return nil, err
	}
	resp, err := c.http.Do(req)
	c.release()
	if err != nil {
		cancel()
		return nil, scrub(err)
	}
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// login creates a session with a direct POST (not through the retrying
// client, which would recurse into authentication), at the sessions
// collection the service root names, or the standard one.
func (c *Conn) login(ctx context.Context) (token, uri string, err error) {
	body, _ := json.Marshal(map[string]string{"UserName": c.info.Username, "Password": c.info.Password})
	target := "/redfish/v1/SessionService/Sessions"
	if c.loginURI != "" {
		target = c.loginURI
	}
	for attempt := 0; ; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
		req, err := http.NewRequestWithContext(cctx, http.MethodPost, c.url(target), bytes.NewReader(body))
		if err != nil {
			cancel()
			return "", "", fmt.Errorf("redfish: login: %w", err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json")
		if err := c.acquire(ctx); err != nil {
			cancel()
			return "", "", fmt.Errorf("redfish: login %s: %w", c.info.Endpoint, err)
		}
		resp, err := c.http.Do(req)
		c.release()
		if err == nil && resp.StatusCode < 500 {
			defer cancel()
			defer drain(resp)
			if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
				return "", "", fmt.Errorf("redfish: login to %s as %q: %w", c.info.Endpoint, c.info.Username, ErrAuth)
			}
			if resp.StatusCode >= 300 {
				return "", "", c.httpError(http.MethodPost, target, resp)
			}
			tok := resp.Header.Get("X-Auth-Token")
			loc := resp.Header.Get("Location")
			if tok == "" {
				return "", "", fmt.Errorf("redfish: login to %s: %w: no X-Auth-Token in the answer", c.info.Endpoint, ErrAuth)
			}
			if i := strings.Index(loc, "/redfish/"); i > 0 {
				loc = loc[i:]
			}
			return tok, loc, nil
		}
		cancel()
		if err == nil {
			err = c.httpError(http.MethodPost, target, resp)
			drain(resp)
		} else {
			err = scrub(err)
		}
		if ctx.Err() != nil {
			return "", "", fmt.Errorf("redfish: login to %s: %w", c.info.Endpoint, ctx.Err())
		}
		if attempt >= c.opts.Retries {
			return "", "", fmt.Errorf("redfish: login to %s: %w: %w", c.info.Endpoint, ErrUnavailable, err)
		}
		if serr := c.opts.Sleep(ctx, c.backoff(attempt)); serr != nil {
			return "", "", fmt.Errorf("redfish: login to %s: %w", c.info.Endpoint, serr)
		}
	}
}

func (c *Conn) backoff(attempt int) time.Duration {
	d := c.opts.BackoffBase << attempt
	return d/2 + rand.N(d/2+1)
}

func (c *Conn) acquire(ctx context.Context) error {
	select {
	case c.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *Conn) release() { <-c.sem }

// do runs one request with the limit, per-call timeout, 5xx backoff and a
// single re-login after a 401.
func (c *Conn) do(ctx context.Context, method, uri string, body []byte, contentType string, headers map[string]string) (*http.Response, error) {
	gen, err := c.ensureAuth(ctx, -1)
	if err != nil {
		return nil, err
	}
	relogged := false
	for attempt := 0; ; attempt++ {
		resp, cancel, err := c.once(ctx, method, uri, body, contentType, headers)
		if err == nil && resp.StatusCode == http.StatusUnauthorized && !relogged && c.usesSession() {
			drain(resp)
			cancel()
			relogged = true
			c.opts.Logger.Debug("redfish: session rejected, logging in again", "bmc", c.info.Endpoint)
			if gen, err = c.ensureAuth(ctx, gen); err != nil {
				return nil, err
			}
			attempt--
			continue
		}
		retryable := (err != nil && ctx.Err() == nil) || (err == nil && resp.StatusCode >= 500)
		if !retryable || attempt >= c.opts.Retries {
			if err != nil {
				cancel()
				if ctx.Err() != nil {
					return nil, fmt.Errorf("redfish: %s %s: %w", method, uri, ctx.Err())
				}
				return nil, fmt.Errorf("redfish: %s %s on %s: %w: %w", method, uri, c.info.Endpoint, ErrUnavailable, scrub(err))
			}
			if resp.StatusCode >= 300 {
				defer cancel()
				defer drain(resp)
				he := c.httpError(method, uri, resp)
				if resp.StatusCode == http.StatusUnauthorized {
					return nil, fmt.Errorf("%w: %w", he, ErrAuth)
				}
				return nil, he
			}
			resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
			return resp, nil
		}
		wait := c.backoff(attempt)
		if err == nil {
			if ra, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && ra > 0 && ra <= 60 {
				wait = time.Duration(ra) * time.Second
			}
			drain(resp)
		}
		cancel()
		c.opts.Logger.Debug("redfish: retrying", "bmc", c.info.Endpoint, "method", method, "uri", uri, "attempt", attempt+1, "wait", wait)
		if serr := c.opts.Sleep(ctx, wait); serr != nil {
			return nil, fmt.Errorf("redfish: %s %s: %w", method, uri, serr)
		}
	}
}

func (c *Conn) usesSession() bool {
	c.authMu.Lock()
	defer c.authMu.Unlock()
	return c.token != ""
}

func (c *Conn) once(ctx context.Context, method, uri string, body []byte, contentType string, headers map[string]string) (*http.Response, context.CancelFunc, error) {
	cctx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(cctx, method, c.url(uri), rd)
	if err != nil {
		cancel()
		return nil, func() {}, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("OData-Version", "4.0")
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range headers {
		if k != "" {
			req.Header.Set(k, v)
		}
	}
	c.authMu.Lock()
	tok := c.token
	c.authMu.Unlock()
	if tok != "" {
		req.Header.Set("X-Auth-Token", tok)
	} else if c.info.Username != "" {
		req.SetBasicAuth(c.info.Username, c.info.Password)
	}
	if err := c.acquire(ctx); err != nil {
		cancel()
		return nil, func() {}, err
	}
	resp, err := c.http.Do(req)
	c.release()
	if err != nil {
		cancel()
		return nil, func() {}, err
	}
	return resp, cancel, nil
}

type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
}

// httpError decodes a failed answer; a password the BMC might echo in its
// message is masked.
func (c *Conn) httpError(method, uri string, resp *http.Response) *HTTPError {
	he := decodeHTTPError(method, uri, resp)
	if c.info.Password != "" {
		he.Message = strings.ReplaceAll(he.Message, c.info.Password, "******")
	}
	return he
}

func decodeHTTPError(method, uri string, resp *http.Response) *HTTPError {
	he := &HTTPError{Method: method, URI: uri, Status: resp.StatusCode}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var e struct {
		Error struct {
			Code     string `json:"code"`
			Message  string `json:"message"`
			Extended []struct {
				MessageID string `json:"MessageId"`
				Message   string `json:"Message"`
			} `json:"@Message.ExtendedInfo"`
		} `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil {
		he.MessageID, he.Message = e.Error.Code, e.Error.Message
		if len(e.Error.Extended) > 0 {
			he.MessageID, he.Message = e.Error.Extended[0].MessageID, e.Error.Extended[0].Message
		}
	}
	return he
}

// scrub drops the request URL from transport errors: a URL never carries
// a password here (ParseInfo refuses userinfo), but the error text is kept
// short and free of query strings.
func scrub(err error) error {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		if inner := ue.Unwrap(); inner != nil {
			return inner
		}
	}
	return err
}

// callClient implements gofish's common.Client for one caller's context.
type callClient struct {
	c   *Conn
	ctx context.Context
}

var _ common.Client = (*callClient)(nil)

func (cc *callClient) send(method, uri string, payload any, headers map[string]string) (*http.Response, error) {
	var body []byte
	ct := ""
	if payload != nil {
		var err error
		if body, err = json.Marshal(payload); err != nil {
			return nil, fmt.Errorf("redfish: %s %s: encode body: %w", method, uri, err)
		}
		ct = "application/json"
	}
	return cc.c.do(cc.ctx, method, uri, body, ct, headers)
}

func (cc *callClient) Get(uri string) (*http.Response, error) {
	return cc.send(http.MethodGet, uri, nil, nil)
}
func (cc *callClient) GetWithHeaders(uri string, h map[string]string) (*http.Response, error) {
	return cc.send(http.MethodGet, uri, nil, h)
}
func (cc *callClient) Post(uri string, p any) (*http.Response, error) {
	return cc.send(http.MethodPost, uri, p, nil)
}
func (cc *callClient) PostWithHeaders(uri string, p any, h map[string]string) (*http.Response, error) {
	return cc.send(http.MethodPost, uri, p, h)
}
func (cc *callClient) PostMultipart(uri string, _ map[string]io.Reader) (*http.Response, error) {
	return nil, fmt.Errorf("redfish: POST %s: multipart upload is not supported by this driver", uri)
}
func (cc *callClient) PostMultipartWithHeaders(uri string, p map[string]io.Reader, _ map[string]string) (*http.Response, error) {
	return cc.PostMultipart(uri, p)
}
func (cc *callClient) Patch(uri string, p any) (*http.Response, error) {
	return cc.send(http.MethodPatch, uri, p, nil)
}
func (cc *callClient) PatchWithHeaders(uri string, p any, h map[string]string) (*http.Response, error) {
	return cc.send(http.MethodPatch, uri, p, h)
}
func (cc *callClient) Put(uri string, p any) (*http.Response, error) {
	return cc.send(http.MethodPut, uri, p, nil)
}
func (cc *callClient) PutWithHeaders(uri string, p any, h map[string]string) (*http.Response, error) {
	return cc.send(http.MethodPut, uri, p, h)
}
func (cc *callClient) Delete(uri string) (*http.Response, error) {
	return cc.send(http.MethodDelete, uri, nil, nil)
}
func (cc *callClient) DeleteWithHeaders(uri string, h map[string]string) (*http.Response, error) {
	return cc.send(http.MethodDelete, uri, nil, h)
}

// getJSON fetches uri and decodes it into a generic map, the tolerant
// form inspection reads from.
func getJSON(cl common.Client, uri string) (map[string]any, error) {
	resp, err := cl.Get(uri)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var m map[string]any
	if err := json.NewDecoder(io.LimitReader(resp.Body, 16<<20)).Decode(&m); err != nil {
		return nil, fmt.Errorf("redfish: GET %s: decode: %w", uri, err)
	}
	return m, nil
}
