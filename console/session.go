package console

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

const (
	// initialBackoff and maxBackoff pace restarts of a console program
	// that keeps exiting (a BMC refusing SOL): 1 s, 2 s, 4 s ... 30 s. A
	// program that ran for maxBackoff or longer restarts after
	// initialBackoff again.
	initialBackoff = time.Second
	maxBackoff     = 30 * time.Second
	// aliveAfter is how long a program with no Spec.Ready must survive
	// to count as up.
	aliveAfter = 100 * time.Millisecond
	// startOutputBytes bounds StartError.Output.
	startOutputBytes = 4096
	// holdFlush is how long output that might be the start of a secret
	// is held back before it is released as it is.
	holdFlush = 20 * time.Millisecond
)

// session is one Start of a node's console: the supervisor of its
// program, its TCP listener, its clients and its transcript. A session
// is used once; a new Start makes a new one.
type session struct {
	m         *Manager
	spec      Spec
	idle      time.Duration
	scrub     *scrubber
	ln        net.Listener
	addr      string
	startedAt time.Time
	tr        *transcript

	ctx    context.Context // the supervisor's life; cancelled by stop
	cancel context.CancelFunc
	ready  chan error    // the first start's outcome, sent once
	done   chan struct{} // closed once every goroutine of the session returned
	wg     sync.WaitGroup

	stopOnce sync.Once

	mu       sync.Mutex
	running  bool     // up and not stopped: clients may attach
	pty      *os.File // the current program's terminal, nil between restarts
	pid      int
	clients  map[*Client]struct{}
	writer   *Client
	outHold  []byte // output held back: it may be the start of a secret
	inHold   []byte // input held back, likewise
	heldAt   time.Time
	outTail  []byte // the current program's last output, for StartError
	finished bool
}

func programName(path string) string { return filepath.Base(path) }

func newSession(m *Manager, spec Spec, ln net.Listener) (*session, error) {
	tr, err := newTranscript(m.opts.TranscriptBytes, m.opts.TranscriptDir, spec.NodeUUID)
	if err != nil {
		return nil, err
	}
	idle := spec.IdleTimeout
	if idle == 0 {
		idle = m.opts.IdleTimeout
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &session{
		m:         m,
		spec:      spec,
		idle:      idle,
		scrub:     newScrubber(spec.Secrets),
		ln:        ln,
		addr:      ln.Addr().String(),
		startedAt: m.clock.Now(),
		tr:        tr,
		ctx:       ctx,
		cancel:    cancel,
		ready:     make(chan error, 1),
		done:      make(chan struct{}),
		clients:   make(map[*Client]struct{}),
	}, nil
}

// discard releases a session that was never launched.
func (s *session) discard() {
	s.cancel()
	_ = s.ln.Close()
	_ = s.tr.close()
	close(s.done)
}

// launch starts the supervisor and the TCP accept loop.
func (s *session) launch() {
	s.wg.Add(2)
	go s.supervise()
	go s.serveTCP()
	go func() {
		s.wg.Wait()
		close(s.done)
	}()
}

// stop ends the session and waits, at most until ctx is done, for its
// program's process group and its goroutines to be gone.
func (s *session) stop(ctx context.Context) error {
	s.stopOnce.Do(func() {
		s.cancel()
		_ = s.ln.Close()
	})
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("console: node %s: waiting for the console to stop: %w", s.spec.NodeUUID, ctx.Err())
	}
}

func (s *session) isRunning() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running
}

func (s *session) info() Info {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Info{NodeUUID: s.spec.NodeUUID, Addr: s.addr, PID: s.pid, StartedAt: s.startedAt}
}

func (s *session) logger() *loggerScrub {
	return &loggerScrub{l: s.m.log.With("node", s.spec.NodeUUID), sc: s.scrub}
}

// supervise keeps the console program running until the session stops.
func (s *session) supervise() {
	defer s.wg.Done()
	defer s.finish()
	log := s.logger()
	backoff := initialBackoff
	first := true
	for {
		s.runBefore()
		began := time.Now()
		up, err := s.runOnce(first)
		if first && !up {
			return
		}
		first = false
		if s.ctx.Err() != nil {
			return
		}
		if time.Since(began) >= maxBackoff {
			backoff = initialBackoff
		}
		log.warn("console program exited; restarting", "error", err, "backoff", backoff)
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// finish releases the clients and the transcript once the supervisor is
// done: clients read what is buffered, then io.EOF.
func (s *session) finish() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running = false
	s.finished = true
	s.releaseHeldLocked()
	for c := range s.clients {
		s.detachLocked(c, io.EOF)
	}
	if err := s.tr.close(); err != nil {
		s.logger().warn("console transcript file incomplete", "error", err)
	}
}

// runBefore runs Spec.Before to completion, bounded by SubprocessTimeout.
func (s *session) runBefore() {
	b := s.spec.Before
	if b == nil || s.ctx.Err() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.m.opts.SubprocessTimeout)
	defer cancel()
	out, err := runToCompletion(ctx, b, s.m.opts.KillTimeout)
	if err != nil {
		s.logger().warn("console pre-start command failed", "program", programName(b.Path),
			"error", err, "output", strings.TrimSpace(string(out)))
	}
}

// runOnce starts the console program and returns when it has exited and
// its process group is gone. On the first start it reports to s.ready
// whether the program came up; up says whether it did.
func (s *session) runOnce(first bool) (up bool, err error) {
	log := s.logger()
	cmd := exec.Command(s.spec.Command.Path, s.spec.Command.Args...)
	cmd.Env = commandEnv(s.spec.Command.Env)
	p, err := startProcess(cmd)
	if err != nil {
		if first {
			s.ready <- s.startError(fmt.Errorf("%s", s.scrub.string(err.Error())))
		}
		return false, err
	}
	log.debug("console program started", "pid", p.pid)
	readyText := []byte(s.spec.Ready)
	seen := make(chan struct{})
	s.mu.Lock()
	s.pty, s.pid, s.outTail = p.pty, p.pid, nil
	s.mu.Unlock()
	pumped := make(chan struct{})
	go func() {
		defer close(pumped)
		s.pump(p.pty, readyText, seen)
	}()

	if first {
		err = s.awaitUp(p, seen)
		if err == nil {
			s.mu.Lock()
			s.running = !s.finished
			s.mu.Unlock()
			up = true
			s.ready <- nil
		}
	}
	if err == nil {
		select {
		case <-p.exited:
			err = exitError(p)
		case <-s.ctx.Done():
		}
	}
	s.terminate(p)
	// The group is gone, so the terminal reads EOF; a process that left
	// the group but kept the terminal open must not hold the pump.
	select {
	case <-pumped:
	case <-time.After(s.m.opts.KillTimeout):
	}
	_ = p.pty.Close()
	<-pumped
	s.mu.Lock()
	s.pty, s.pid = nil, 0
	s.releaseHeldLocked()
	s.mu.Unlock()
	if first && !up {
		s.ready <- s.startError(err)
	}
	return up, err
}

// awaitUp waits for the first start's program to come up: to print
// Spec.Ready, or to survive aliveAfter.
func (s *session) awaitUp(p *process, seen <-chan struct{}) error {
	timeout := time.NewTimer(s.m.opts.SubprocessTimeout)
	defer timeout.Stop()
	var upSignal <-chan struct{} = seen
	if s.spec.Ready == "" {
		alive := make(chan struct{})
		t := time.AfterFunc(aliveAfter, func() { close(alive) })
		defer t.Stop()
		upSignal = alive
	}
	select {
	case <-upSignal:
		select {
		case <-p.exited:
			return exitError(p)
		default:
			return nil
		}
	case <-p.exited:
		return exitError(p)
	case <-timeout.C:
		if s.spec.Ready != "" {
			return fmt.Errorf("no %q within %s", s.spec.Ready, s.m.opts.SubprocessTimeout)
		}
		return fmt.Errorf("not up within %s", s.m.opts.SubprocessTimeout)
	case <-s.ctx.Done():
		return fmt.Errorf("stopped while starting: %w", context.Canceled)
	}
}

func exitError(p *process) error {
	if p.waitErr != nil {
		return fmt.Errorf("program exited: %w", p.waitErr)
	}
	return errors.New("program exited with status 0")
}

func (s *session) startError(err error) *StartError {
	s.mu.Lock()
	out := strings.TrimSpace(string(s.outTail))
	s.mu.Unlock()
	return &StartError{
		NodeUUID: s.spec.NodeUUID,
		Program:  programName(s.spec.Command.Path),
		Output:   s.scrub.string(out),
		Err:      errors.New(s.scrub.string(err.Error())),
	}
}

// terminate ends the program's process group: SIGTERM, SIGKILL after
// KillTimeout, then waits for the group to be gone.
func (s *session) terminate(p *process) {
	kt := s.m.opts.KillTimeout
	signalGroup(p.pid, sigTERM)
	select {
	case <-p.exited:
	case <-time.After(kt):
	}
	// SIGKILL also after a clean exit: the program's children (a shell's
	// grandchildren) stay in its group and must not outlive it.
	signalGroup(p.pid, sigKILL)
	<-p.exited
	if !waitGroupGone(p.pid, kt) {
		s.logger().warn("console process group still has processes after SIGKILL", "pgid", p.pid)
	}
}

// pump copies the terminal's output to the transcript and the clients
// until the terminal is closed or its last writer is gone.
func (s *session) pump(f *os.File, readyText []byte, seen chan struct{}) {
	buf := make([]byte, 32<<10)
	var window []byte
	for {
		// Under the lock, so that input's deadline and this one cannot
		// overtake each other: with nothing held the pump sleeps in Read.
		s.mu.Lock()
		var deadline time.Time
		if len(s.outHold) > 0 || len(s.inHold) > 0 {
			deadline = s.heldAt.Add(holdFlush)
		}
		_ = f.SetReadDeadline(deadline)
		s.mu.Unlock()
		n, err := f.Read(buf)
		if n > 0 {
			// Recorded before Start hears of it, so the ready text is in
			// the transcript when Start returns.
			s.output(buf[:n])
			if readyText != nil {
				window = append(window, buf[:n]...)
				if bytes.Contains(window, readyText) {
					close(seen)
					readyText = nil
					window = nil
				} else if keep := len(readyText) - 1; len(window) > keep {
					window = append(window[:0], window[len(window)-keep:]...)
				}
			}
		}
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				s.releaseHeld(time.Now())
				continue
			}
			return
		}
	}
}

// output records a piece of the machine's output and hands it to every
// client; a client whose buffer would overflow is closed.
func (s *session) output(data []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var emit []byte
	emit, s.outHold = s.scrub.split(s.outHold, data)
	if len(s.outHold) > 0 {
		s.heldAt = time.Now()
	}
	s.emitLocked(false, emit)
}

func (s *session) emitLocked(input bool, data []byte) {
	if len(data) == 0 {
		return
	}
	s.tr.add(s.m.clock.Now(), input, data)
	if input {
		return
	}
	s.outTail = append(s.outTail, data...)
	if len(s.outTail) > startOutputBytes {
		s.outTail = append(s.outTail[:0], s.outTail[len(s.outTail)-startOutputBytes:]...)
	}
	for c := range s.clients {
		if !c.deliver(data) {
			s.detachLocked(c, ErrClientTooSlow)
		}
	}
}

// releaseHeld releases held-back bytes older than holdFlush: what the
// program printed was not a secret after all.
func (s *session) releaseHeld(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(s.heldAt) >= holdFlush {
		s.releaseHeldLocked()
	}
}

func (s *session) releaseHeldLocked() {
	out, in := s.outHold, s.inHold
	s.outHold, s.inHold = nil, nil
	s.emitLocked(false, s.scrub.flush(out))
	s.emitLocked(true, s.scrub.flush(in))
}

// input records keystrokes of the read-write client and returns the
// terminal to write them to (nil between restarts: they are dropped).
func (s *session) input(c *Client, p []byte) (*os.File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.clients[c]; !ok {
		return nil, c.err()
	}
	var emit []byte
	emit, s.inHold = s.scrub.split(s.inHold, p)
	if len(s.inHold) > 0 {
		s.heldAt = time.Now()
		if s.pty != nil {
			// Wake the pump to release the held keys should no output
			// come first.
			_ = s.pty.SetReadDeadline(s.heldAt.Add(holdFlush))
		}
	}
	s.emitLocked(true, emit)
	return s.pty, nil
}

// attach adds a client; onClose, when set, runs once the client closes
// (the TCP and WebSocket servers close their connection in it).
func (s *session) attach(mode Mode, onClose func()) (*Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running {
		return nil, fmt.Errorf("%w %s", ErrNoSession, s.spec.NodeUUID)
	}
	if mode == ReadWrite && s.writer != nil {
		return nil, ErrWriterBusy
	}
	c := newClient(s, mode, onClose)
	s.clients[c] = struct{}{}
	if mode == ReadWrite {
		s.writer = c
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		c.watchIdle(s.idle)
	}()
	return c, nil
}

// detach closes a client with err (what its Read returns once drained).
func (s *session) detach(c *Client, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.detachLocked(c, err)
}

func (s *session) detachLocked(c *Client, err error) {
	if _, ok := s.clients[c]; !ok {
		return
	}
	delete(s.clients, c)
	if s.writer == c {
		s.writer = nil
	}
	c.closeWith(err)
	if !errors.Is(err, io.EOF) && !errors.Is(err, errClientClosed) {
		s.logger().info("console client closed", "mode", c.mode.String(), "reason", err)
	}
}

// commandEnv is the environment of a console program: PATH and TERM
// from here, then the Command's own. The rest of this process's
// environment (database passwords, say) is not passed on.
func commandEnv(env []string) []string {
	out := []string{"PATH=" + os.Getenv("PATH"), "TERM=xterm"}
	return append(out, env...)
}
