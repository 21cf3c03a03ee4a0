package console

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/anvilmetal/anvil/clock"
)

// Defaults of Options, Ironic's [console] defaults where Ironic has one.
const (
	defaultBindAddress       = "127.0.0.1"
	defaultIdleTimeout       = 600 * time.Second
	defaultSubprocessTimeout = 10 * time.Second
	defaultKillTimeout       = time.Second
	defaultTranscriptBytes   = 1 << 20
	defaultTokenTTL          = 10 * time.Minute

	// maxTokens bounds the outstanding tokens of one Manager, so a caller
	// issuing tokens in a loop cannot grow memory without limit.
	maxTokens = 10000
)

// Manager owns the running consoles of one process. It is safe for
// concurrent use. Close stops them all and leaves no child process.
type Manager struct {
	opts    Options
	optsErr error
	log     *slog.Logger
	clock   clock.Clock

	mu       sync.Mutex
	closed   bool
	sessions map[string]*session // the latest session of each node, running or stopped
	tokens   map[[sha256.Size]byte]tokenEntry
	nodeOps  map[string]*nodeLock
	nextPort int // where the next search of PortRange begins
}

// tokenEntry is what a token grants; the map holding it is keyed by the
// token's SHA-256, so the token itself is never stored and a lookup's
// timing says nothing about its bytes.
type tokenEntry struct {
	node    string
	mode    Mode
	expires time.Time
}

// nodeLock serialises Start and Stop of one node without holding up other
// nodes: a Start waits up to SubprocessTimeout for its program.
type nodeLock struct {
	ch   chan struct{}
	refs int
}

// NewManager returns a Manager with opts' defaults filled in. Invalid
// options (a reversed PortRange, say) make every Start fail with a
// *SpecError naming the option.
func NewManager(opts Options) *Manager {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Clock == nil {
		opts.Clock = clock.System()
	}
	if opts.BindAddress == "" {
		opts.BindAddress = defaultBindAddress
	}
	if opts.IdleTimeout == 0 {
		opts.IdleTimeout = defaultIdleTimeout
	}
	if opts.SubprocessTimeout == 0 {
		opts.SubprocessTimeout = defaultSubprocessTimeout
	}
	if opts.KillTimeout == 0 {
		opts.KillTimeout = defaultKillTimeout
	}
	if opts.TranscriptBytes == 0 {
		opts.TranscriptBytes = defaultTranscriptBytes
	}
	if opts.TokenTTL == 0 {
		opts.TokenTTL = defaultTokenTTL
	}
	m := &Manager{
		opts:     opts,
		log:      opts.Logger,
		clock:    opts.Clock,
		sessions: make(map[string]*session),
		tokens:   make(map[[sha256.Size]byte]tokenEntry),
		nodeOps:  make(map[string]*nodeLock),
		nextPort: opts.PortRange[0],
	}
	m.optsErr = validateOptions(opts)
	return m
}

func validateOptions(o Options) error {
	bad := func(field, want string) error { return &SpecError{NodeUUID: "-", Field: field, Want: want} }
	lo, hi := o.PortRange[0], o.PortRange[1]
	if (lo != 0 || hi != 0) && (lo < 1 || hi > 65535 || lo > hi) {
		return bad("Options.PortRange", fmt.Sprintf("1 <= low <= high <= 65535, got %d:%d", lo, hi))
	}
	if net.ParseIP(o.BindAddress) == nil && o.BindAddress != "localhost" {
		return bad("Options.BindAddress", fmt.Sprintf("an IP address, got %q", o.BindAddress))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"Options.IdleTimeout", o.IdleTimeout},
		{"Options.SubprocessTimeout", o.SubprocessTimeout},
		{"Options.KillTimeout", o.KillTimeout},
		{"Options.TokenTTL", o.TokenTTL},
	} {
		if d.v < 0 {
			return bad(d.name, "a positive duration, got "+d.v.String())
		}
	}
	if o.TranscriptBytes < 0 {
		return bad("Options.TranscriptBytes", "a positive size, got "+strconv.Itoa(o.TranscriptBytes))
	}
	return nil
}

func validateSpec(spec Spec) error {
	bad := func(field, want string) error {
		node := spec.NodeUUID
		if node == "" {
			node = "-"
		}
		return &SpecError{NodeUUID: node, Field: field, Want: want}
	}
	switch {
	case spec.NodeUUID == "":
		return bad("Spec.NodeUUID", "a node UUID")
	case spec.Command.Path == "":
		return bad("Spec.Command.Path", "the console program's path")
	case spec.Before != nil && spec.Before.Path == "":
		return bad("Spec.Before.Path", "a program's path, or a nil Before")
	case spec.Port < 0 || spec.Port > 65535:
		return bad("Spec.Port", fmt.Sprintf("0 or a TCP port up to 65535, got %d", spec.Port))
	case spec.IdleTimeout < 0:
		return bad("Spec.IdleTimeout", "0 or a positive duration, got "+spec.IdleTimeout.String())
	}
	return nil
}

// lockNode takes the node's operation lock, waiting at most until ctx is
// done.
func (m *Manager) lockNode(ctx context.Context, node string) (func(), error) {
	m.mu.Lock()
	l := m.nodeOps[node]
	if l == nil {
		l = &nodeLock{ch: make(chan struct{}, 1)}
		m.nodeOps[node] = l
	}
	l.refs++
	m.mu.Unlock()
	release := func() {
		m.mu.Lock()
		l.refs--
		if l.refs == 0 {
			delete(m.nodeOps, node)
		}
		m.mu.Unlock()
	}
	select {
	case l.ch <- struct{}{}:
		return func() { <-l.ch; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}

// Start starts the node's console, replacing one already running for it
// (Ironic's start_console), and returns when the program is up and the
// TCP port listens, or with a *StartError after SubprocessTimeout.
func (m *Manager) Start(ctx context.Context, spec Spec) (Info, error) {
	if m.optsErr != nil {
		return Info{}, m.optsErr
	}
	if err := validateSpec(spec); err != nil {
		return Info{}, err
	}
	spec = cloneSpec(spec)
	unlock, err := m.lockNode(ctx, spec.NodeUUID)
	if err != nil {
		return Info{}, err
	}
	defer unlock()

	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return Info{}, ErrClosed
	}
	old := m.sessions[spec.NodeUUID]
	m.mu.Unlock()
	if old != nil {
		if err := old.stop(ctx); err != nil {
			return Info{}, err
		}
	}

	ln, err := m.listen(spec)
	if err != nil {
		return Info{}, &StartError{NodeUUID: spec.NodeUUID, Program: programName(spec.Command.Path), Err: err}
	}
	s, err := newSession(m, spec, ln)
	if err != nil {
		_ = ln.Close()
		return Info{}, &StartError{NodeUUID: spec.NodeUUID, Program: programName(spec.Command.Path), Err: err}
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		s.discard()
		return Info{}, ErrClosed
	}
	// The session is registered before it is up so that a Close racing
	// with this Start stops it; Info and Attach see it only once running.
	m.sessions[spec.NodeUUID] = s
	m.mu.Unlock()
	s.launch()

	select {
	case err = <-s.ready:
	case <-ctx.Done():
		err = &StartError{NodeUUID: spec.NodeUUID, Program: programName(spec.Command.Path), Err: ctx.Err()}
	}
	if err != nil {
		_ = s.stop(context.WithoutCancel(ctx))
		m.log.Warn("console did not start", "node", spec.NodeUUID, "error", s.scrub.string(err.Error()))
		return Info{}, err
	}
	info := s.info()
	m.log.Info("console started", "node", spec.NodeUUID, "addr", info.Addr, "pid", info.PID)
	return info, nil
}

func cloneSpec(s Spec) Spec {
	s.Command.Args = append([]string(nil), s.Command.Args...)
	s.Command.Env = append([]string(nil), s.Command.Env...)
	if s.Before != nil {
		b := *s.Before
		b.Args = append([]string(nil), b.Args...)
		b.Env = append([]string(nil), b.Env...)
		s.Before = &b
	}
	s.Secrets = append([]string(nil), s.Secrets...)
	return s
}

// listen opens the raw TCP console's port: the Spec's, else the next free
// one of PortRange, else any free port.
func (m *Manager) listen(spec Spec) (net.Listener, error) {
	bind := m.opts.BindAddress
	if spec.Port != 0 {
		return net.Listen("tcp", net.JoinHostPort(bind, strconv.Itoa(spec.Port)))
	}
	lo, hi := m.opts.PortRange[0], m.opts.PortRange[1]
	if lo == 0 && hi == 0 {
		return net.Listen("tcp", net.JoinHostPort(bind, "0"))
	}
	m.mu.Lock()
	start := m.nextPort
	m.mu.Unlock()
	if start < lo || start > hi {
		start = lo
	}
	n := hi - lo + 1
	for i := range n {
		p := lo + (start-lo+i)%n
		ln, err := net.Listen("tcp", net.JoinHostPort(bind, strconv.Itoa(p)))
		if err == nil {
			m.mu.Lock()
			m.nextPort = p + 1
			m.mu.Unlock()
			return ln, nil
		}
	}
	return nil, fmt.Errorf("%w %d:%d on %s", ErrPortsExhausted, lo, hi, bind)
}

// Stop stops the node's console and waits for its process group to be
// gone. Stopping a console that is not running is not an error. The
// transcript stays readable until the next Start. The node's tokens are
// revoked.
func (m *Manager) Stop(ctx context.Context, nodeUUID string) error {
	unlock, err := m.lockNode(ctx, nodeUUID)
	if err != nil {
		return err
	}
	defer unlock()
	m.mu.Lock()
	s := m.sessions[nodeUUID]
	for k, e := range m.tokens {
		if e.node == nodeUUID {
			delete(m.tokens, k)
		}
	}
	m.mu.Unlock()
	if s == nil {
		return nil
	}
	if err := s.stop(ctx); err != nil {
		return err
	}
	m.log.Info("console stopped", "node", nodeUUID)
	return nil
}

// running returns the node's session when its console is up.
func (m *Manager) running(nodeUUID string) *session {
	m.mu.Lock()
	s := m.sessions[nodeUUID]
	m.mu.Unlock()
	if s == nil || !s.isRunning() {
		return nil
	}
	return s
}

// Info reports the node's running console.
func (m *Manager) Info(nodeUUID string) (Info, bool) {
	s := m.running(nodeUUID)
	if s == nil {
		return Info{}, false
	}
	return s.info(), true
}

// Attach connects a client to the node's console. A second ReadWrite
// client fails with ErrWriterBusy. The client stays attached across
// restarts of the console program and ends with io.EOF when the console
// stops.
func (m *Manager) Attach(ctx context.Context, nodeUUID string, mode Mode) (*Client, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if mode != ReadOnly && mode != ReadWrite {
		return nil, &SpecError{NodeUUID: nodeUUID, Field: "mode", Want: "ReadOnly or ReadWrite, got " + mode.String()}
	}
	s := m.running(nodeUUID)
	if s == nil {
		return nil, fmt.Errorf("%w %s", ErrNoSession, nodeUUID)
	}
	return s.attach(mode, nil)
}

// Transcript returns a copy of the node's latest session transcript,
// oldest first, or ErrNoSession when the node never had one.
func (m *Manager) Transcript(nodeUUID string) ([]Chunk, error) {
	m.mu.Lock()
	s := m.sessions[nodeUUID]
	m.mu.Unlock()
	if s == nil {
		return nil, fmt.Errorf("%w %s", ErrNoSession, nodeUUID)
	}
	return s.tr.snapshot(), nil
}

// IssueToken returns a token for the node's console; the node's console
// must be running. The token opens the page and the WebSocket any number
// of times until it expires or the console is stopped.
func (m *Manager) IssueToken(nodeUUID string, mode Mode) (Token, error) {
	if mode != ReadOnly && mode != ReadWrite {
		return Token{}, &SpecError{NodeUUID: nodeUUID, Field: "mode", Want: "ReadOnly or ReadWrite, got " + mode.String()}
	}
	if m.running(nodeUUID) == nil {
		return Token{}, fmt.Errorf("%w %s", ErrNoSession, nodeUUID)
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return Token{}, fmt.Errorf("console: node %s: reading random token: %w", nodeUUID, err)
	}
	value := base64.RawURLEncoding.EncodeToString(raw[:])
	now := m.clock.Now()
	t := Token{Value: value, NodeUUID: nodeUUID, Mode: mode, Expires: now.Add(m.opts.TokenTTL)}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return Token{}, ErrClosed
	}
	for k, e := range m.tokens {
		if !now.Before(e.expires) {
			delete(m.tokens, k)
		}
	}
	if len(m.tokens) >= maxTokens {
		return Token{}, fmt.Errorf("console: node %s: %d console tokens are outstanding, the most a manager keeps", nodeUUID, maxTokens)
	}
	m.tokens[sha256.Sum256([]byte(value))] = tokenEntry{node: nodeUUID, mode: mode, expires: t.Expires}
	return t, nil
}

// Close stops every console and refuses new ones with ErrClosed. It
// returns when every console program's process group is gone.
func (m *Manager) Close() error {
	m.mu.Lock()
	m.closed = true
	sessions := make([]*session, 0, len(m.sessions))
	for _, s := range m.sessions {
		sessions = append(sessions, s)
	}
	clear(m.tokens)
	m.mu.Unlock()
	var wg sync.WaitGroup
	errs := make([]error, len(sessions))
	for i, s := range sessions {
		wg.Go(func() { errs[i] = s.stop(context.Background()) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
