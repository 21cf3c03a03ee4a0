package console

import (
	"bytes"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// clientBufferBytes bounds the output a client may have waiting: a
// client this far behind is closed with ErrClientTooSlow rather than
// slowing the console or the other clients.
const clientBufferBytes = 256 << 10

// errClientClosed is what Read returns after Close.
var errClientClosed = net.ErrClosed

// Client is one attached console client: Read returns the machine's
// output from the moment of attaching, Write sends keystrokes (ReadWrite
// only). A client that falls more than its buffer behind is closed.
type Client struct {
	s       *session
	mode    Mode
	onClose func()

	notify chan struct{} // a token when output arrived or the client closed
	done   chan struct{} // closed when the client is closed

	mu     sync.Mutex
	buf    bytes.Buffer
	last   time.Time // the last byte in either direction, for the idle timeout
	reason error     // why the client was closed; nil while open
}

func newClient(s *session, mode Mode, onClose func()) *Client {
	return &Client{
		s:       s,
		mode:    mode,
		onClose: onClose,
		notify:  make(chan struct{}, 1),
		done:    make(chan struct{}),
		last:    s.m.clock.Now(),
	}
}

// Mode reports how the client is attached.
func (c *Client) Mode() Mode { return c.mode }

// Read returns the machine's output. Once the client is closed it returns
// what was buffered, then the reason: io.EOF when the console stopped,
// ErrIdleTimeout, ErrClientTooSlow, or net.ErrClosed after Close.
func (c *Client) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		c.mu.Lock()
		if c.buf.Len() > 0 {
			n, _ := c.buf.Read(p)
			c.mu.Unlock()
			return n, nil
		}
		reason := c.reason
		c.mu.Unlock()
		if reason != nil {
			return 0, reason
		}
		<-c.notify
	}
}

// Write sends keystrokes to the machine. ReadOnly clients get
// ErrReadOnly. Between restarts of the console program the bytes are
// recorded in the transcript but reach no program.
func (c *Client) Write(p []byte) (int, error) {
	if c.mode != ReadWrite {
		return 0, ErrReadOnly
	}
	if len(p) == 0 {
		return 0, nil
	}
	f, err := c.s.input(c, p)
	if err != nil {
		return 0, err
	}
	c.touch()
	if f == nil {
		return len(p), nil
	}
	n, err := f.Write(p)
	if err != nil && errors.Is(err, net.ErrClosed) {
		// The program is being restarted; as above, the keys are lost.
		return len(p), nil
	}
	return n, err
}

// Close detaches the client; a ReadWrite client frees the keyboard.
func (c *Client) Close() error {
	c.s.detach(c, errClientClosed)
	return nil
}

func (c *Client) err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reason != nil {
		return c.reason
	}
	return errClientClosed
}

func (c *Client) touch() {
	now := c.s.m.clock.Now()
	c.mu.Lock()
	c.last = now
	c.mu.Unlock()
}

// deliver buffers output for the client; false means the client is too
// far behind and must be closed.
func (c *Client) deliver(data []byte) bool {
	now := c.s.m.clock.Now()
	c.mu.Lock()
	if c.buf.Len()+len(data) > clientBufferBytes {
		c.mu.Unlock()
		return false
	}
	c.buf.Write(data)
	c.last = now
	c.mu.Unlock()
	c.wake()
	return true
}

func (c *Client) wake() {
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

// closeWith is called by the session, with its lock held, exactly once.
func (c *Client) closeWith(reason error) {
	c.mu.Lock()
	c.reason = reason
	if !errors.Is(reason, errClientClosed) && !errors.Is(reason, io.EOF) {
		c.buf.Reset() // a slow or idle client gets no stale output
	}
	c.mu.Unlock()
	close(c.done)
	c.wake()
	if c.onClose != nil {
		go c.onClose()
	}
}

// watchIdle closes the client once idle has passed on the Manager's clock
// with no byte in either direction.
func (c *Client) watchIdle(idle time.Duration) {
	clk := c.s.m.clock
	wait := idle
	for {
		select {
		case <-c.done:
			return
		case <-clk.After(wait):
		}
		c.mu.Lock()
		since := clk.Now().Sub(c.last)
		c.mu.Unlock()
		if since >= idle {
			c.s.detach(c, ErrIdleTimeout)
			return
		}
		wait = idle - since
	}
}
