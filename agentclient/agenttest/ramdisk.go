package agenttest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/clock"
)

// IPA's defaults for lookup and heartbeat timing.
const (
	DefaultLookupInterval    = time.Second      // ipa-lookup-interval
	DefaultLookupMaxInterval = 60 * time.Second // back-off cap
	DefaultLookupTimeout     = 600 * time.Second
	DefaultMinForcedInterval = 5 * time.Second // forced heartbeats at most this often
)

// IPA's fallbacks and the versions it caps its requests at.
var (
	ipaFallbackAPIVersion = agentclient.APIVersion{Major: 1, Minor: 31}
	ipaLookupMaxVersion   = agentclient.APIVersion{Major: 1, Minor: 62}
	ipaHeartbeatMaxVer    = agentclient.APIVersion{Major: 1, Minor: 68}
)

// Errors a ramdisk run ends with.
var (
	// ErrLookupTimeout means no lookup succeeded within the lookup timeout.
	ErrLookupTimeout = errors.New("agenttest: lookup timed out")
	// ErrTokenLockout means lookup returned a masked token while the agent
	// had none of its own: IPA stops and locks down.
	ErrTokenLockout = errors.New("agenttest: lookup returned a masked token and the agent has none")
)

// RamdiskConfig configures a simulated ramdisk.
type RamdiskConfig struct {
	// APIURL is where the lookup and heartbeat handler is mounted (IPA's
	// ipa-api-url).
	APIURL string
	// HTTPClient talks to the API. Nil means a client with a 30 s
	// timeout and the system's CAs.
	HTTPClient *http.Client
	// MACs are the node's NIC addresses sent at lookup.
	MACs []string
	// NodeUUID is sent at lookup when set (ipa-node-uuid).
	NodeUUID string
	// Agent is the fake IPA the ramdisk serves. Nil means NewAgent with
	// default settings.
	Agent *Agent
	// Server hosts the agent. Nil means a private TLS server on a free
	// loopback port, closed when Run returns.
	Server *Server
	// ServerAddr is the private server's listen address when Server is
	// nil ("127.1.0.7:0"); empty means 127.0.0.1 on a free port.
	ServerAddr string
	// ID is the agent's path on a shared Server. Empty means the node UUID,
	// else the first MAC without colons.
	ID string
	// PregeneratedToken is a token handed to the ramdisk at boot
	// (ipa-agent-token, virtual media); lookup then answers "******".
	PregeneratedToken string

	// LookupInterval, LookupMaxInterval and LookupTimeout drive the
	// lookup back-off. Zero means IPA's defaults (1 s, 60 s, 600 s).
	LookupInterval    time.Duration
	LookupMaxInterval time.Duration
	LookupTimeout     time.Duration
	// LookupConflictBackoff is how long to sleep after each 409 in turn.
	// Nil means IPA's 5, 10, 30 s.
	LookupConflictBackoff []time.Duration
	// HeartbeatInterval fixes the time between heartbeats. Zero means
	// IPA's rule: heartbeat_timeout from lookup × random(0.3, 0.6).
	HeartbeatInterval time.Duration
	// HeartbeatRetryMin and HeartbeatRetryMax bound the random wait after
	// a failed heartbeat. Zero means IPA's 5 and 10 s.
	HeartbeatRetryMin, HeartbeatRetryMax time.Duration
	// MinForcedInterval limits heartbeats forced by a finished command.
	// Zero means 5 s.
	MinForcedInterval time.Duration

	// Inspection, when set, makes the ramdisk an inspection ramdisk (IPA booted with ipa-inspection-callback-url): before the lookup it posts the inventory to the callback URL, then goes on to lookup and heartbeat as usual.
	Inspection *InspectionConfig

	// Seed seeds the jitter. Zero means a random seed.
	Seed uint64
	// Clock paces every wait. Nil means the system clock.
	Clock clock.Clock
	// Logger receives the ramdisk's progress. Nil discards.
	Logger *slog.Logger
}

// RamdiskStats counts what a ramdisk did.
type RamdiskStats struct {
	Lookups            int
	HeartbeatsSent     int
	HeartbeatsAccepted int
	LastStatus         int // HTTP status of the last heartbeat
	LastError          string

	// InspectionsPosted counts inspection data posts (every attempt);
	// InspectionsAccepted those answered with 2xx.
	InspectionsPosted   int
	InspectionsAccepted int
	// LastInspectionStatus is the HTTP status of the last post, 0 when it
	// got no answer; LastInspectionError its fault string or connection
	// error, empty after a success.
	LastInspectionStatus int
	LastInspectionError  string
}

// Ramdisk plays what IPA does after boot: look the node up (with
// back-off), adopt the token, serve the agent API, and heartbeat until the
// agent goes away or the context ends. Run drives it; the other methods are
// safe to call concurrently.
type Ramdisk struct {
	cfg    RamdiskConfig
	agent  *Agent
	server *Server
	own    bool
	id     string
	url    string
	hc     *http.Client
	clock  clock.Clock
	rnd    *rand.Rand
	log    *slog.Logger

	mu        sync.Mutex
	nodeUUID  string
	apiVer    agentclient.APIVersion
	hbTimeout time.Duration
	stats     RamdiskStats
	lookup    *agentclient.LookupResponse
	body      json.RawMessage // cached heartbeat body
	bodyToken string
	bodyVer   agentclient.APIVersion

	inspectURL  string // continue_inspection URL, when inspecting
	inspectBody []byte // encoded inspection data, when inspecting
}

// NewRamdisk prepares a simulated ramdisk: it registers the agent on the
// server (starting a private one when none is given). Nothing is sent
// before Run.
func NewRamdisk(cfg RamdiskConfig) (*Ramdisk, error) {
	if cfg.APIURL == "" {
		return nil, fmt.Errorf("agenttest: NewRamdisk: APIURL is required")
	}
	if _, err := url.Parse(cfg.APIURL); err != nil {
		return nil, fmt.Errorf("agenttest: NewRamdisk: APIURL: %w", err)
	}
	if len(cfg.MACs) == 0 && cfg.NodeUUID == "" {
		return nil, fmt.Errorf("agenttest: NewRamdisk: MACs or NodeUUID is required for lookup")
	}
	r := &Ramdisk{cfg: cfg, agent: cfg.Agent, server: cfg.Server, hc: cfg.HTTPClient, clock: cfg.Clock, log: cfg.Logger}
	if cfg.Inspection != nil {
		var err error
		if r.inspectURL, r.inspectBody, err = prepareInspection(cfg); err != nil {
			return nil, err
		}
	}
	if r.clock == nil {
		r.clock = clock.System()
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.hc == nil {
		r.hc = &http.Client{Timeout: 30 * time.Second}
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	r.rnd = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	if r.agent == nil {
		r.agent = NewAgent(AgentConfig{Clock: r.clock, Token: cfg.PregeneratedToken})
	} else if cfg.PregeneratedToken != "" {
		r.agent.SetToken(cfg.PregeneratedToken)
	}
	r.id = cfg.ID
	if r.server == nil {
		srv, err := NewServer(ServerConfig{Addr: cfg.ServerAddr, Clock: r.clock})
		if err != nil {
			return nil, err
		}
		r.server, r.own, r.id = srv, true, ""
	} else if r.id == "" {
		r.id = strings.ToLower(cfg.NodeUUID)
		if r.id == "" {
			r.id = strings.ReplaceAll(strings.ToLower(cfg.MACs[0]), ":", "")
		}
	}
	u, err := r.server.Register(r.id, r.agent)
	if err != nil {
		if r.own {
			_ = r.server.Close()
		}
		return nil, err
	}
	r.url = u
	r.nodeUUID = strings.ToLower(cfg.NodeUUID)
	return r, nil
}

// Agent is the fake IPA this ramdisk serves.
func (r *Ramdisk) Agent() *Agent { return r.agent }

// URL is the callback URL the ramdisk reports in its heartbeats.
func (r *Ramdisk) URL() string { return r.url }

// NodeUUID is the node the lookup found (or the configured one before).
func (r *Ramdisk) NodeUUID() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.nodeUUID
}

// LookupResponse is the last successful lookup answer, or nil.
func (r *Ramdisk) LookupResponse() *agentclient.LookupResponse {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lookup
}

// Stats returns counters of what the ramdisk did.
func (r *Ramdisk) Stats() RamdiskStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

// Close unregisters the agent, stops a private server and closes the agent.
// Call it after Run returned.
func (r *Ramdisk) Close() error {
	r.server.Unregister(r.id)
	r.agent.Close()
	if r.own {
		return r.server.Close()
	}
	return nil
}

// sleep waits d or until ctx ends.
func (r *Ramdisk) sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-r.clock.After(d):
		return nil
	}
}

func (r *Ramdisk) request(ctx context.Context, method, path string, q url.Values, body any, ver agentclient.APIVersion) (int, []byte, error) {
	u := strings.TrimRight(r.cfg.APIURL, "/") + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	return r.requestURL(ctx, method, u, body, ver)
}

// requestURL sends one request to a full URL with IPA's headers and
// returns the status and up to 4 MiB of the answer.
func (r *Ramdisk) requestURL(ctx context.Context, method, u string, body any, ver agentclient.APIVersion) (int, []byte, error) {
	var rd io.Reader
	switch b := body.(type) {
	case json.RawMessage:
		rd = bytes.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	case nil:
	default:
		enc, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(enc)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Content-Type", "application/json")
	if ver != (agentclient.APIVersion{}) {
		req.Header.Set(agentclient.HeaderAPIVersion, ver.String())
	}
	resp, err := r.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	return resp.StatusCode, data, err
}

// discoverVersion reads the API's default version as IPA does, falling
// back to 1.31 when discovery fails.
func (r *Ramdisk) discoverVersion(ctx context.Context) agentclient.APIVersion {
	if v, ok := r.discover(ctx); ok {
		return v
	}
	return ipaFallbackAPIVersion
}

// discover returns the API's default version, asking GET / unless an
// earlier discovery succeeded; ok is false when discovery failed.
func (r *Ramdisk) discover(ctx context.Context) (agentclient.APIVersion, bool) {
	r.mu.Lock()
	v := r.apiVer
	r.mu.Unlock()
	if v != (agentclient.APIVersion{}) {
		return v, true
	}
	status, body, err := r.request(ctx, http.MethodGet, "/", nil, nil, agentclient.APIVersion{})
	if err != nil || status != http.StatusOK {
		return agentclient.APIVersion{}, false
	}
	var doc struct {
		DefaultVersion struct {
			Version string `json:"version"`
		} `json:"default_version"`
	}
	if json.Unmarshal(body, &doc) != nil {
		return agentclient.APIVersion{}, false
	}
	v, err = agentclient.ParseAPIVersion(doc.DefaultVersion.Version)
	if err != nil {
		return agentclient.APIVersion{}, false
	}
	r.mu.Lock()
	r.apiVer = v
	r.mu.Unlock()
	return v, true
}

func minVersion(a, b agentclient.APIVersion) agentclient.APIVersion {
	if a.Less(b) {
		return a
	}
	return b
}

// Lookup looks the node up with IPA's back-off until it succeeds, the
// lookup timeout passes, or ctx ends. On success the agent adopts the
// token.
func (r *Ramdisk) Lookup(ctx context.Context) error {
	b := r.newBackoff()
	for {
		ok, status, err := r.lookupOnce(ctx)
		if ok || err != nil && (errors.Is(err, ErrTokenLockout) || ctx.Err() != nil) {
			return err
		}
		wait, more := b.next(status)
		if !more {
			return fmt.Errorf("%w after %s (last status %d)", ErrLookupTimeout, b.timeout, status)
		}
		if err := r.sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// backoff paces retries as IPA paces its lookup: random exponential
// back-off from LookupInterval capped at LookupMaxInterval, the
// LookupConflictBackoff pauses after each 409, all within LookupTimeout.
type backoff struct {
	r                              *Ramdisk
	interval, maxInterval, timeout time.Duration
	conflict                       []time.Duration
	conflicts                      int
	deadline                       time.Time
}

func (r *Ramdisk) newBackoff() *backoff {
	b := &backoff{
		r:           r,
		interval:    orDefault(r.cfg.LookupInterval, DefaultLookupInterval),
		maxInterval: orDefault(r.cfg.LookupMaxInterval, DefaultLookupMaxInterval),
		timeout:     orDefault(r.cfg.LookupTimeout, DefaultLookupTimeout),
		conflict:    r.cfg.LookupConflictBackoff,
	}
	if b.conflict == nil {
		b.conflict = []time.Duration{5 * time.Second, 10 * time.Second, 30 * time.Second}
	}
	b.deadline = r.clock.Now().Add(b.timeout)
	return b
}

// next returns the wait before the attempt that follows one answered with
// status (0: no answer), and false when that wait would end past the
// deadline.
func (b *backoff) next(status int) (time.Duration, bool) {
	var wait time.Duration
	if status == http.StatusConflict && len(b.conflict) > 0 {
		wait = b.conflict[min(b.conflicts, len(b.conflict)-1)]
		b.conflicts++
	} else {
		// Random exponential back-off, as oslo's BackOffLoopingCall.
		wait = time.Duration(float64(b.interval) * (0.5 + b.r.rnd.Float64()*0.5))
		b.interval = min(b.interval*2, b.maxInterval)
	}
	return wait, !b.r.clock.Now().Add(wait).After(b.deadline)
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// lookupOnce sends one lookup. It reports success, the HTTP status, and a
// fatal error (token lockout) or a transient one.
func (r *Ramdisk) lookupOnce(ctx context.Context) (bool, int, error) {
	ver := minVersion(r.discoverVersion(ctx), ipaLookupMaxVersion)
	q := url.Values{}
	q.Set("addresses", strings.Join(r.cfg.MACs, ","))
	if r.cfg.NodeUUID != "" {
		q.Set("node_uuid", r.cfg.NodeUUID)
	}
	r.mu.Lock()
	r.stats.Lookups++
	r.mu.Unlock()
	status, body, err := r.request(ctx, http.MethodGet, "/v1/lookup", q, nil, ver)
	if err != nil {
		r.log.Debug("agenttest: lookup failed", "error", err)
		return false, 0, err
	}
	if status != http.StatusOK {
		r.log.Debug("agenttest: lookup refused", "status", status)
		return false, status, nil
	}
	var lr agentclient.LookupResponse
	if err := json.Unmarshal(body, &lr); err != nil || lr.Node.UUID == "" {
		return false, status, nil
	}
	tok := lr.Config.AgentToken
	switch {
	case tok == agentclient.MaskedToken:
		if r.agent.Token() == "" {
			return false, status, ErrTokenLockout
		}
	case len(tok) >= agentclient.MinAcceptedTokenLength:
		r.agent.SetToken(tok)
	default:
		return false, status, nil
	}
	r.mu.Lock()
	r.nodeUUID = lr.Node.UUID
	r.hbTimeout = time.Duration(lr.Config.HeartbeatTimeout) * time.Second
	r.lookup = &lr
	r.mu.Unlock()
	return true, status, nil
}

// Heartbeat sends one heartbeat and returns the HTTP status. Any status
// but 202 is an error.
func (r *Ramdisk) Heartbeat(ctx context.Context) (int, error) {
	ver := minVersion(r.discoverVersion(ctx), ipaHeartbeatMaxVer)
	body, err := r.heartbeatBody(ver)
	if err != nil {
		return 0, err
	}
	node := r.NodeUUID()
	status, data, err := r.request(ctx, http.MethodPost, "/v1/heartbeat/"+url.PathEscape(node), nil, body, ver)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stats.HeartbeatsSent++
	r.stats.LastStatus = status
	switch {
	case err != nil:
		r.stats.LastError = err.Error()
		return 0, fmt.Errorf("agenttest: heartbeat for %s: %w", node, err)
	case status != http.StatusAccepted:
		fault := strings.TrimSpace(string(data))
		if e, ok := agentclient.ParseIronicError(data); ok {
			fault = e.Faultstring
		}
		r.stats.LastError = fault
		return status, fmt.Errorf("agenttest: heartbeat for %s: HTTP %d: %s", node, status, fault)
	}
	r.stats.HeartbeatsAccepted++
	r.stats.LastError = ""
	return status, nil
}

// heartbeatBody returns the encoded heartbeat: the fields the API version
// allows, as IPA sends them. It is cached until the token changes, since a
// ramdisk sends the same body for its whole life.
func (r *Ramdisk) heartbeatBody(ver agentclient.APIVersion) (json.RawMessage, error) {
	tok := r.agent.Token()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.body != nil && r.bodyToken == tok && r.bodyVer == ver {
		return r.body, nil
	}
	body := map[string]string{"callback_url": r.url}
	if ver.AtLeast(agentclient.APIVersion{Major: 1, Minor: 62}) {
		body["agent_token"] = tok
	}
	if ver.AtLeast(agentclient.APIVersion{Major: 1, Minor: 36}) {
		body["agent_version"] = r.agent.Version()
	}
	if pemText := r.server.CertPEM(); pemText != "" && ver.AtLeast(agentclient.APIVersion{Major: 1, Minor: 68}) {
		body["agent_verify_ca"] = pemText
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("agenttest: encoding heartbeat: %w", err)
	}
	r.body, r.bodyToken, r.bodyVer = b, tok, ver
	return b, nil
}

// heartbeatInterval is IPA's: fixed when configured, else
// heartbeat_timeout × random(0.3, 0.6).
func (r *Ramdisk) heartbeatInterval() time.Duration {
	if r.cfg.HeartbeatInterval > 0 {
		return r.cfg.HeartbeatInterval
	}
	r.mu.Lock()
	t := r.hbTimeout
	r.mu.Unlock()
	if t <= 0 {
		t = agentclient.DefaultHeartbeatTimeout
	}
	return time.Duration(float64(t) * (0.3 + 0.3*r.rnd.Float64()))
}

func (r *Ramdisk) retryInterval() time.Duration {
	lo := orDefault(r.cfg.HeartbeatRetryMin, 5*time.Second)
	hi := orDefault(r.cfg.HeartbeatRetryMax, 10*time.Second)
	if hi < lo {
		hi = lo
	}
	return lo + time.Duration(r.rnd.Float64()*float64(hi-lo))
}

// Run posts the inventory when the ramdisk inspects (a failed post is
// logged and Run carries on, as IPA does), looks the node up, then
// heartbeats until ctx ends (nil) or the agent goes away after power_off,
// run_image, finalize_rescue or lockdown (nil). It returns ErrLookupTimeout
// or ErrTokenLockout when lookup fails for good; after a token lockout the
// agent stops serving, as IPA does. The first heartbeat is immediate; a
// finished command forces one, at most every MinForcedInterval.
func (r *Ramdisk) Run(ctx context.Context) error {
	if r.cfg.Inspection != nil {
		if err := r.Inspect(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			r.log.Warn("agenttest: inspection data not accepted; carrying on to the lookup", "error", err)
		}
	}
	if err := r.Lookup(ctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		if errors.Is(err, ErrTokenLockout) {
			r.agent.lockDown()
		}
		return err
	}
	minForced := orDefault(r.cfg.MinForcedInterval, DefaultMinForcedInterval)
	var lastBeat time.Time
	next := time.Duration(0)
	for {
		var forced bool
		select {
		case <-ctx.Done():
			return nil
		case <-r.agent.Gone():
			return nil
		case <-r.clock.After(next):
		case <-r.agent.CommandFinished():
			forced = true
		}
		if forced {
			if since := r.clock.Now().Sub(lastBeat); since < minForced {
				// Too soon: wait out the rest of the minimum, then beat;
				// the periodic heartbeat still comes when it is due, as
				// IPA checks both every few seconds.
				wait := minForced - since
				if due := next - since; due < wait {
					wait = max(due, 0)
				}
				if err := r.sleep(ctx, wait); err != nil {
					return nil
				}
			}
		}
		if r.agent.IsGone() {
			return nil
		}
		lastBeat = r.clock.Now()
		if _, err := r.Heartbeat(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			r.log.Debug("agenttest: heartbeat failed", "node", r.NodeUUID(), "error", err)
			next = r.retryInterval()
			continue
		}
		next = r.heartbeatInterval()
	}
}
