package ipmisim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"
)

// maxTyped bounds what a Machine keeps of the bytes typed at it.
const maxTyped = 1 << 20

// Machine is the serial port of a simulated machine: a TCP listener on
// 127.0.0.1 that ipmi_sim's SOL device connects to (Options.SOL =
// m.Addr()). What a SOL client types arrives here (Typed, WaitTyped);
// what the test prints (Print) is what the client reads. With echo on it
// sends every byte back as it arrives, as a terminal line discipline
// does, for measuring keystroke-to-echo latency. A new connection from
// ipmi_sim (after it restarted) replaces the old one.
type Machine struct {
	ln        net.Listener
	done      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup

	mu      sync.Mutex
	conn    net.Conn
	typed   []byte
	echo    bool
	changed chan struct{} // closed and replaced when conn or typed change
}

// NewMachine listens on a free loopback port for the duration of t.
func NewMachine(t testing.TB) *Machine {
	t.Helper()
	m, err := ListenMachine("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// ListenMachine listens on addr (a loopback host:port); the caller must
// Close the Machine.
func ListenMachine(addr string) (*Machine, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("ipmisim: machine serial port: %w", err)
	}
	m := &Machine{ln: ln, done: make(chan struct{}), changed: make(chan struct{})}
	m.wg.Add(1)
	go m.accept() // owned by m; ends when Close closes the listener
	return m, nil
}

// Addr is the host:port to give Options.SOL.
func (m *Machine) Addr() string { return m.ln.Addr().String() }

// SetEcho turns echoing of typed bytes on or off.
func (m *Machine) SetEcho(on bool) {
	m.mu.Lock()
	m.echo = on
	m.mu.Unlock()
}

func (m *Machine) notifyLocked() {
	close(m.changed)
	m.changed = make(chan struct{})
}

func (m *Machine) accept() {
	defer m.wg.Done()
	for {
		c, err := m.ln.Accept()
		if err != nil {
			return
		}
		m.mu.Lock()
		select {
		case <-m.done: // Close ran meanwhile
			m.mu.Unlock()
			_ = c.Close()
			return
		default:
		}
		if m.conn != nil {
			_ = m.conn.Close()
		}
		m.conn = c
		m.notifyLocked()
		m.mu.Unlock()
		m.wg.Add(1)
		go m.read(c) // owned by m; ends when c is closed (replaced or Close)
	}
}

func (m *Machine) read(c net.Conn) {
	defer m.wg.Done()
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			m.mu.Lock()
			if m.echo {
				_, _ = c.Write(buf[:n])
			}
			m.typed = append(m.typed, buf[:n]...)
			if len(m.typed) > maxTyped {
				m.typed = m.typed[len(m.typed)-maxTyped:]
			}
			m.notifyLocked()
			m.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// wait blocks until cond (called with m.mu held) is true or ctx ends.
func (m *Machine) wait(ctx context.Context, what string, cond func() bool) error {
	for {
		m.mu.Lock()
		ok, ch := cond(), m.changed
		m.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-m.done:
			return errors.New("ipmisim: machine closed while waiting for " + what)
		case <-ctx.Done():
			return fmt.Errorf("ipmisim: waiting for %s: %w", what, ctx.Err())
		}
	}
}

// WaitConnected waits until ipmi_sim has connected its SOL device.
func (m *Machine) WaitConnected(ctx context.Context) error {
	return m.wait(ctx, "ipmi_sim's SOL connection", func() bool { return m.conn != nil })
}

// Print writes p to the serial port (the machine's output), waiting for
// ipmi_sim's connection first.
func (m *Machine) Print(ctx context.Context, p []byte) error {
	if err := m.WaitConnected(ctx); err != nil {
		return err
	}
	m.mu.Lock()
	c := m.conn
	m.mu.Unlock()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetWriteDeadline(dl)
		defer func() { _ = c.SetWriteDeadline(time.Time{}) }()
	}
	_, err := c.Write(p)
	if err != nil {
		return fmt.Errorf("ipmisim: machine print: %w", err)
	}
	return nil
}

// Typed returns a copy of what has been typed so far (the last MiB).
func (m *Machine) Typed() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	return bytes.Clone(m.typed)
}

// WaitTyped waits until the typed bytes contain want.
func (m *Machine) WaitTyped(ctx context.Context, want string) error {
	return m.wait(ctx, fmt.Sprintf("%q typed", want), func() bool { return bytes.Contains(m.typed, []byte(want)) })
}

// Close stops listening, drops ipmi_sim's connection and waits for the
// Machine's goroutines.
func (m *Machine) Close() error {
	var err error
	m.closeOnce.Do(func() {
		m.mu.Lock()
		close(m.done)
		if m.conn != nil {
			_ = m.conn.Close()
		}
		m.mu.Unlock()
		err = m.ln.Close()
	})
	m.wg.Wait()
	return err
}
