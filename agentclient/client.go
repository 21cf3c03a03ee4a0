package agentclient

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/anvilmetal/anvil/clock"
	"github.com/anvilmetal/anvil/internal/jsonexact"
)

// Defaults of Ironic's [agent] options the client honours.
const (
	DefaultCommandTimeout      = 60 * time.Second
	DefaultMaxCommandAttempts  = 3
	DefaultCommandWaitInterval = 6 * time.Second
	DefaultCommandWaitAttempts = 100
	DefaultAgentAPIVersion     = "v1"
)

// maxResponseBytes bounds what the client reads from an agent. System logs
// are the largest answer.
const maxResponseBytes = 256 << 20

// ClientConfig configures a Client. The zero value means Ironic's defaults
// with the system's CA pool.
type ClientConfig struct {
	// CommandTimeout bounds each HTTP request ([agent]command_timeout).
	CommandTimeout time.Duration
	// MaxCommandAttempts is how many times a command is sent when the
	// agent cannot be reached ([agent]max_command_attempts).
	MaxCommandAttempts int
	// CommandWaitInterval and CommandWaitAttempts drive polling of
	// commands Ironic polls ([agent]command_wait_interval/attempts).
	CommandWaitInterval time.Duration
	CommandWaitAttempts int
	// RootCAs verifies agents that sent no certificate in their heartbeat
	// ([agent]verify_ca). Nil means the system pool.
	RootCAs *x509.CertPool
	// MinTLSVersion is the minimum TLS version ([agent]tls_minimum_version).
	// Zero means TLS 1.3.
	MinTLSVersion uint16
	// APIVersion is the path prefix of the agent API ([agent]
	// agent_api_version). Empty means "v1".
	APIVersion string
	// Logger gets debug lines for retries. Tokens are never logged. Nil
	// means slog.Default(), as everywhere an embedder configures logging.
	Logger *slog.Logger
	// Clock paces polling. Nil means the system clock.
	Clock clock.Clock
	// DialContext, when set, replaces the dialer (tests use it to inject
	// connection failures).
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// TracerProvider, when set, records a client span of every command
	// sent to an agent ("agent <command>") and of every read of a
	// command's status ("agent command status"), children of the
	// caller's span. Nil means none.
	TracerProvider trace.TracerProvider
}

// Agent addresses one node's running agent: where it listens, its token and
// the certificate it pinned. The conductor builds it from
// driver_internal_info (agent_url, agent_secret_token, agent_verify_ca).
type Agent struct {
	// NodeUUID names the node in errors and logs.
	NodeUUID string
	// URL is the agent's callback_url, e.g. https://10.0.0.5:9999. A path
	// prefix is kept.
	URL string
	// Token is the agent token, sent as the agent_token query parameter.
	Token string
	// VerifyCA is the PEM certificate the agent sent in its heartbeat. When
	// set, the agent's certificate must chain to it (it is pinned);
	// otherwise ClientConfig.RootCAs applies.
	VerifyCA string
}

// Client talks to IPA agents over their REST API. It is safe for
// concurrent use by many goroutines and many nodes. Close releases idle
// connections.
type Client struct {
	cfg    ClientConfig
	log    *slog.Logger
	clock  clock.Clock
	tracer trace.Tracer

	mu      sync.Mutex
	clients map[[32]byte]*pooledClient // by pinned certificate; zero key = RootCAs
	closed  bool
}

// TracerName is the instrumentation name of the agent client's spans.
const TracerName = "github.com/anvilmetal/anvil/agentclient"

// endCommandSpan ends a command's span with the command's outcome.
func endCommandSpan(span trace.Span, r *CommandResult, err error) {
	if r != nil {
		span.SetAttributes(attribute.String("anvil.agent.command_id", r.ID), attribute.String("anvil.agent.command_status", string(r.Status)))
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// pooledClient is an HTTP client kept for one pinned certificate.
type pooledClient struct {
	hc       *http.Client
	lastUsed time.Time
}

// maxPooledClients bounds the HTTP clients kept. Real agents make a new
// certificate at every boot, so a long-lived conductor would otherwise
// keep one transport per boot forever; the least recently used is dropped.
const maxPooledClients = 4096

// NewClient returns a client. It fails when a numeric setting is negative
// or the TLS minimum is below TLS 1.2.
func NewClient(cfg ClientConfig) (*Client, error) {
	if cfg.CommandTimeout < 0 || cfg.MaxCommandAttempts < 0 || cfg.CommandWaitInterval < 0 || cfg.CommandWaitAttempts < 0 {
		return nil, fmt.Errorf("%w: agentclient: NewClient: timeouts and attempts must not be negative", ErrInvalidArgument)
	}
	if cfg.CommandTimeout == 0 {
		cfg.CommandTimeout = DefaultCommandTimeout
	}
	if cfg.MaxCommandAttempts == 0 {
		cfg.MaxCommandAttempts = DefaultMaxCommandAttempts
	}
	if cfg.CommandWaitInterval == 0 {
		cfg.CommandWaitInterval = DefaultCommandWaitInterval
	}
	if cfg.CommandWaitAttempts == 0 {
		cfg.CommandWaitAttempts = DefaultCommandWaitAttempts
	}
	if cfg.MinTLSVersion == 0 {
		cfg.MinTLSVersion = tls.VersionTLS13
	}
	if cfg.MinTLSVersion < tls.VersionTLS12 {
		return nil, fmt.Errorf("%w: agentclient: NewClient: MinTLSVersion %#x is below TLS 1.2", ErrInvalidArgument, cfg.MinTLSVersion)
	}
	if cfg.APIVersion == "" {
		cfg.APIVersion = DefaultAgentAPIVersion
	}
	tp := cfg.TracerProvider
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	c := &Client{cfg: cfg, log: cfg.Logger, clock: cfg.Clock, clients: map[[32]byte]*pooledClient{}, tracer: tp.Tracer(TracerName)}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.clock == nil {
		c.clock = clock.System()
	}
	return c, nil
}

// Close closes idle connections. The client must not be used afterwards.
func (c *Client) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, pc := range c.clients {
		pc.hc.CloseIdleConnections()
	}
	c.clients = map[[32]byte]*pooledClient{}
	c.closed = true
}

// httpClient returns the HTTP client for an agent: one per pinned
// certificate, so connections are reused across calls to the same agent.
func (c *Client) httpClient(a Agent) (*http.Client, error) {
	var key [32]byte
	if a.VerifyCA != "" {
		key = sha256.Sum256([]byte(a.VerifyCA))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, fmt.Errorf("%w: agentclient: client is closed", ErrInvalidArgument)
	}
	now := time.Now()
	if pc, ok := c.clients[key]; ok {
		pc.lastUsed = now
		return pc.hc, nil
	}
	if len(c.clients) >= maxPooledClients {
		var oldest [32]byte
		var oldestAt time.Time
		for k, pc := range c.clients {
			if oldestAt.IsZero() || pc.lastUsed.Before(oldestAt) {
				oldest, oldestAt = k, pc.lastUsed
			}
		}
		c.clients[oldest].hc.CloseIdleConnections()
		delete(c.clients, oldest)
	}
	tc := &tls.Config{MinVersion: c.cfg.MinTLSVersion, RootCAs: c.cfg.RootCAs}
	if a.VerifyCA != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(a.VerifyCA)) {
			return nil, fmt.Errorf("%w: agentclient: node %s: the pinned agent certificate is not valid PEM", ErrInvalidArgument, orUnknown(a.NodeUUID))
		}
		tc.RootCAs = pool
	}
	dialer := &net.Dialer{Timeout: c.cfg.CommandTimeout, KeepAlive: 30 * time.Second}
	tr := &http.Transport{
		Proxy:               nil, // the agent is on the provisioning network
		DialContext:         dialer.DialContext,
		TLSClientConfig:     tc,
		TLSHandshakeTimeout: c.cfg.CommandTimeout,
		MaxIdleConnsPerHost: 2,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   false,
	}
	if c.cfg.DialContext != nil {
		tr.DialContext = c.cfg.DialContext
	}
	hc := &http.Client{Transport: tr, Timeout: c.cfg.CommandTimeout}
	c.clients[key] = &pooledClient{hc: hc, lastUsed: now}
	return hc, nil
}

// endpoint builds the URL of path under the agent's API, with the token and
// extra query parameters. It also returns the URL without the token, for
// errors.
func (c *Client) endpoint(a Agent, path string, q url.Values) (full, safe string, err error) {
	base, err := url.Parse(strings.TrimRight(a.URL, "/"))
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return "", "", fmt.Errorf("%w: agentclient: node %s: agent URL %q is not an absolute http(s) URL", ErrInvalidArgument, orUnknown(a.NodeUUID), a.URL)
	}
	base.Path = strings.TrimRight(base.Path, "/") + "/" + c.cfg.APIVersion + "/" + path
	q = maps.Clone(q) // never add the token to the caller's values
	if q == nil {
		q = url.Values{}
	}
	base.RawQuery = q.Encode()
	safe = base.String()
	if a.Token != "" {
		q.Set("agent_token", a.Token)
		base.RawQuery = q.Encode()
	}
	return base.String(), safe, nil
}

// connError marks a transport failure inside the client, before retries
// turn it into a ConnectionError.
type connError struct{ err error }

func (e *connError) Error() string { return e.err.Error() }
func (e *connError) Unwrap() error { return e.err }

// do sends one request and returns the body of a 2xx answer. Transport
// failures come back as *connError with the token scrubbed; HTTP errors as
// *APIError.
func (c *Client) do(ctx context.Context, a Agent, method, path string, q url.Values, body any, what string) ([]byte, error) {
	full, safe, err := c.endpoint(a, path, q)
	if err != nil {
		return nil, err
	}
	hc, err := c.httpClient(a)
	if err != nil {
		return nil, err
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("%w: agentclient: node %s: %s: encoding parameters: %v", ErrInvalidArgument, orUnknown(a.NodeUUID), what, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, full, rd)
	if err != nil {
		return nil, fmt.Errorf("%w: agentclient: node %s: %s: %v", ErrInvalidArgument, orUnknown(a.NodeUUID), what, scrub(err, full, safe))
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, &connError{err: scrub(err, full, safe)}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return nil, &connError{err: scrub(err, full, safe)}
	}
	if resp.StatusCode >= 400 {
		fault := faultOf(data)
		return nil, &APIError{
			Node: a.NodeUUID, Command: what, Status: resp.StatusCode, Fault: fault,
			busy: resp.StatusCode == http.StatusConflict || strings.Contains(strings.ToLower(fault), "agent is busy"),
		}
	}
	return data, nil
}

// scrub replaces the URL carrying the token with the safe one in err.
func scrub(err error, full, safe string) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return &url.Error{Op: ue.Op, URL: safe, Err: ue.Err}
	}
	if full != safe && strings.Contains(err.Error(), full) {
		return errors.New(strings.ReplaceAll(err.Error(), full, safe))
	}
	return err
}

// faultOf extracts IPA's faultstring, or returns the (bounded) raw body.
func faultOf(body []byte) string {
	var f struct {
		Faultstring string `json:"faultstring"`
	}
	if json.Unmarshal(body, &f) == nil && f.Faultstring != "" {
		return f.Faultstring
	}
	if e, ok := ParseIronicError(body); ok {
		return e.Faultstring
	}
	s := strings.TrimSpace(string(body))
	if len(s) > 512 {
		s = s[:512] + "…"
	}
	return s
}

// DecodeCommandResult parses one command result object as IPA sends it.
func DecodeCommandResult(b []byte) (*CommandResult, error) {
	var r CommandResult
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%w: command result: %v", ErrAgentAPI, err)
	}
	if r.ID == "" || r.Name == "" || r.Status == "" {
		return nil, fmt.Errorf("%w: command result lacks id, command_name or command_status", ErrAgentAPI)
	}
	return &r, nil
}

// DecodeCommandList parses the body of GET /v1/commands.
func DecodeCommandList(b []byte) ([]CommandResult, error) {
	var l commandList
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("%w: command list: %v", ErrAgentAPI, err)
	}
	if l.Commands == nil {
		return nil, fmt.Errorf("%w: command list: no commands key", ErrAgentAPI)
	}
	for i := range l.Commands {
		if l.Commands[i].ID == "" || l.Commands[i].Name == "" || l.Commands[i].Status == "" {
			return nil, fmt.Errorf("%w: command list: entry %d lacks id, command_name or command_status", ErrAgentAPI, i)
		}
	}
	return l.Commands, nil
}

// splitCommand checks a full command name "<extension>.<command>".
func splitCommand(name string) (ext, cmd string, err error) {
	ext, cmd, ok := strings.Cut(name, ".")
	if !ok || ext == "" || cmd == "" {
		return "", "", fmt.Errorf("%w: agentclient: command name %q is not <extension>.<command>", ErrInvalidArgument, name)
	}
	return ext, cmd, nil
}

// Err converts a finished result into the typed error it stands for: nil
// for SUCCEEDED and RUNNING, *CommandError for FAILED and the mismatch
// statuses, *APIError when the agent reported itself busy or a TypeError
// (a parameter the agent does not know), as Ironic maps them.
func (r *CommandResult) Err(node, fullName string) error {
	if r.Error != nil {
		switch r.Error.Type {
		case "AgentIsBusy":
			return &APIError{Node: node, Command: fullName, Status: http.StatusConflict, Fault: r.Error.String(), busy: true}
		case "TypeError":
			if r.Status == StatusFailed {
				return &APIError{Node: node, Command: fullName, Status: http.StatusOK, Fault: r.Error.String()}
			}
		}
	}
	switch {
	case r.Status == StatusFailed || r.Status.IsVersionMismatch():
		return &CommandError{Node: node, Command: fullName, ID: r.ID, Status: r.Status, Agent: r.Error}
	case r.Status == StatusRunning || r.Status == StatusSucceeded:
		return nil
	default:
		return &APIError{Node: node, Command: fullName, Status: http.StatusOK, Fault: fmt.Sprintf("unknown command_status %q", r.Status)}
	}
}

// ExecuteCommand runs a command on the agent: POST /v1/commands with
// wait=true (the answer is the finished result) or wait=false (the answer
// is the RUNNING result of an asynchronous command). When the agent cannot
// be reached it first asks the agent whether the same command is already
// running (and then returns that one instead of sending it again), and
// otherwise retries up to MaxCommandAttempts times. The returned result is
// non-nil whenever the agent answered with one; the error is then the
// result's typed error (see CommandResult.Err).
func (c *Client) ExecuteCommand(ctx context.Context, a Agent, name string, params map[string]any, wait bool) (r *CommandResult, err error) {
	ctx, span := c.tracer.Start(ctx, "agent "+name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("anvil.node.uuid", a.NodeUUID), attribute.String("anvil.agent.command", name), attribute.Bool("anvil.agent.wait", wait)))
	defer func() { endCommandSpan(span, r, err) }()
	return c.executeCommand(ctx, a, name, params, wait)
}

func (c *Client) executeCommand(ctx context.Context, a Agent, name string, params map[string]any, wait bool) (*CommandResult, error) {
	_, cmd, err := splitCommand(name)
	if err != nil {
		return nil, err
	}
	if params == nil {
		params = map[string]any{}
	}
	body := map[string]any{"name": name, "params": params}
	q := url.Values{"wait": {fmt.Sprint(wait)}}
	var lastErr error
	attempts := 0
	for attempts < c.cfg.MaxCommandAttempts {
		attempts++
		data, err := c.do(ctx, a, http.MethodPost, "commands/", q, body, name)
		if err == nil {
			r, err := DecodeCommandResult(data)
			if err != nil {
				return nil, &APIError{Node: a.NodeUUID, Command: name, Status: http.StatusOK, Fault: err.Error()}
			}
			return r, r.Err(a.NodeUUID, name)
		}
		var ce *connError
		if !errors.As(err, &ce) {
			return nil, err
		}
		lastErr = ce.err
		if ctx.Err() != nil {
			break
		}
		if r := c.runningSameCommand(ctx, a, cmd, params); r != nil {
			c.log.LogAttrs(ctx, slog.LevelDebug, "agentclient: connection failed but the command is already running on the agent",
				slog.String("node", a.NodeUUID), slog.String("command", name), slog.String("id", r.ID))
			return r, nil
		}
		c.log.LogAttrs(ctx, slog.LevelDebug, "agentclient: cannot reach agent",
			slog.String("node", a.NodeUUID), slog.String("command", name), slog.Int("attempt", attempts), slog.Any("error", lastErr))
	}
	_, safe, _ := c.endpoint(a, "commands/", nil)
	return nil, &ConnectionError{Node: a.NodeUUID, Command: name, URL: safe, Attempts: attempts, Err: lastErr}
}

// runningSameCommand returns the agent's last command when it is the same
// command (name, and parameters when the agent reports them) and still
// RUNNING; nil otherwise, including when the agent is still unreachable.
func (c *Client) runningSameCommand(ctx context.Context, a Agent, cmd string, params map[string]any) *CommandResult {
	list, err := c.ListCommands(ctx, a)
	if err != nil || len(list) == 0 {
		return nil
	}
	last := list[len(list)-1]
	if last.Name != cmd || last.Status != StatusRunning {
		return nil
	}
	if last.Params != nil && !sameJSON(last.Params, params) {
		return nil
	}
	return &last
}

// sameJSON compares two parameter maps after a JSON round trip, so that
// numbers and nested types compare the way the agent saw them.
func sameJSON(a, b map[string]any) bool {
	norm := func(m map[string]any) any {
		bs, err := json.Marshal(m)
		if err != nil {
			return nil
		}
		var v any
		if jsonexact.Decode(bs, &v) != nil {
			return nil
		}
		return v
	}
	return reflect.DeepEqual(norm(a), norm(b))
}

// GetCommandStatus reads one command's result (GET /v1/commands/{id}); with
// wait=true the agent answers only when the command has finished. The
// result is returned as the agent reported it, without turning FAILED into
// an error; use CommandResult.Err for that.
func (c *Client) GetCommandStatus(ctx context.Context, a Agent, id string, wait bool) (r *CommandResult, err error) {
	ctx, span := c.tracer.Start(ctx, "agent command status", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("anvil.node.uuid", a.NodeUUID), attribute.String("anvil.agent.command_id", id), attribute.Bool("anvil.agent.wait", wait)))
	defer func() { endCommandSpan(span, r, err) }()
	return c.getCommandStatus(ctx, a, id, wait)
}

func (c *Client) getCommandStatus(ctx context.Context, a Agent, id string, wait bool) (*CommandResult, error) {
	if id == "" || strings.ContainsAny(id, "/?#") {
		return nil, fmt.Errorf("%w: agentclient: node %s: command id %q", ErrInvalidArgument, orUnknown(a.NodeUUID), id)
	}
	var q url.Values
	if wait {
		q = url.Values{"wait": {"true"}}
	}
	data, err := c.do(ctx, a, http.MethodGet, "commands/"+url.PathEscape(id), q, nil, "get command "+id)
	if err != nil {
		return nil, c.final(a, "get command "+id, err)
	}
	r, err := DecodeCommandResult(data)
	if err != nil {
		return nil, &APIError{Node: a.NodeUUID, Command: "get command " + id, Status: http.StatusOK, Fault: err.Error()}
	}
	return r, nil
}

// ListCommands returns every command the agent ran since it started, in
// execution order (GET /v1/commands).
func (c *Client) ListCommands(ctx context.Context, a Agent) ([]CommandResult, error) {
	data, err := c.do(ctx, a, http.MethodGet, "commands/", nil, nil, "list commands")
	if err != nil {
		return nil, c.final(a, "list commands", err)
	}
	l, err := DecodeCommandList(data)
	if err != nil {
		return nil, &APIError{Node: a.NodeUUID, Command: "list commands", Status: http.StatusOK, Fault: err.Error()}
	}
	return l, nil
}

// Status returns the agent's start time and version (GET /v1/status).
func (c *Client) Status(ctx context.Context, a Agent) (AgentStatus, error) {
	data, err := c.do(ctx, a, http.MethodGet, "status", nil, nil, "status")
	if err != nil {
		return AgentStatus{}, c.final(a, "status", err)
	}
	var s AgentStatus
	if err := json.Unmarshal(data, &s); err != nil {
		return AgentStatus{}, &APIError{Node: a.NodeUUID, Command: "status", Status: http.StatusOK, Fault: "invalid status body: " + err.Error()}
	}
	return s, nil
}

// final turns a single-shot transport failure into a ConnectionError.
func (c *Client) final(a Agent, what string, err error) error {
	var ce *connError
	if errors.As(err, &ce) {
		_, safe, _ := c.endpoint(a, "", nil)
		return &ConnectionError{Node: a.NodeUUID, Command: what, URL: safe, Attempts: 1, Err: ce.err}
	}
	return err
}

// LastCommand returns the last result in list whose command name (without
// extension) is cmd, or nil.
func LastCommand(list []CommandResult, cmd string) *CommandResult {
	for i := len(list) - 1; i >= 0; i-- {
		if list[i].Name == cmd {
			return &list[i]
		}
	}
	return nil
}

// WaitForCommand polls the command list every CommandWaitInterval, up to
// CommandWaitAttempts times, until the last command called name (full
// "<extension>.<command>" name) is no longer RUNNING, as Ironic does for
// commands it polls. It returns the finished result and its typed error,
// or a *PollTimeoutError.
func (c *Client) WaitForCommand(ctx context.Context, a Agent, name string) (*CommandResult, error) {
	_, cmd, err := splitCommand(name)
	if err != nil {
		return nil, err
	}
	for i := 1; i <= c.cfg.CommandWaitAttempts; i++ {
		list, err := c.ListCommands(ctx, a)
		if err != nil {
			return nil, err
		}
		if r := LastCommand(list, cmd); r != nil && r.Status.Done() {
			return r, r.Err(a.NodeUUID, name)
		}
		if i == c.cfg.CommandWaitAttempts {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("agentclient: node %s: waiting for %s: %w", orUnknown(a.NodeUUID), name, ctx.Err())
		case <-c.clock.After(c.cfg.CommandWaitInterval):
		}
	}
	return nil, &PollTimeoutError{Node: a.NodeUUID, Command: name, Attempts: c.cfg.CommandWaitAttempts}
}
