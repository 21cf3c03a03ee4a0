// Package faultlab injects faults between Anvil and its database for
// tests and benchmarks: Proxy is a TCP proxy on 127.0.0.1 that forwards to
// one upstream address (a PostgreSQL server) and can cut every connection
// and refuse new ones for as long as a test wants, then restore service,
// as a database restart or a network partition would look to the client.
//
// Only the proxy is cut: the upstream server keeps running, so tests share
// one PostgreSQL server with other tests and never stop it.
package faultlab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Proxy forwards TCP connections from a 127.0.0.1 listener to an
// upstream address. Create it with Listen and stop it with Close.
type Proxy struct {
	upstream string
	ln       net.Listener

	mu     sync.Mutex
	cut    bool
	conns  map[*pair]struct{}
	cutAt  time.Time
	cuts   int
	closed bool

	wg sync.WaitGroup
}

// pair is one proxied connection: the client's side and the upstream's.
type pair struct {
	client, server net.Conn
	once           sync.Once
}

func (p *pair) close() {
	p.once.Do(func() {
		_ = p.client.Close()
		_ = p.server.Close()
	})
}

// Listen starts a proxy on 127.0.0.1 (a free port) forwarding to
// upstream ("127.0.0.1:5432").
func Listen(upstream string) (*Proxy, error) {
	if _, _, err := net.SplitHostPort(upstream); err != nil {
		return nil, fmt.Errorf("faultlab: upstream %q: want host:port: %w", upstream, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultlab: listening: %w", err)
	}
	p := &Proxy{upstream: upstream, ln: ln, conns: make(map[*pair]struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's listening address ("127.0.0.1:PORT").
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut closes every proxied connection at once (both sides) and makes the
// proxy close every new connection as soon as it is accepted, until
// Restore. To the client this is a database that went away: queries in
// flight fail, and connecting fails.
func (p *Proxy) Cut() {
	p.mu.Lock()
	if !p.cut {
		p.cut = true
		p.cutAt = time.Now()
		p.cuts++
	}
	// The pairs stop being forwarded now, not when their copying
	// goroutines notice: Conns counts only live forwarding at once.
	conns := make([]*pair, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
		delete(p.conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
}

// Restore ends a cut: new connections are forwarded again. It returns
// how long the cut lasted (zero when there was none).
func (p *Proxy) Restore() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.cut {
		return 0
	}
	p.cut = false
	return time.Since(p.cutAt)
}

// IsCut reports whether the proxy is cut.
func (p *Proxy) IsCut() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cut
}

// Conns is the number of connections being forwarded.
func (p *Proxy) Conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.conns)
}

// Close stops listening, closes every connection and waits for the
// proxy's goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.Cut()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// A transient accept error (too many files): back off a
			// little rather than spin.
			time.Sleep(10 * time.Millisecond)
			continue
		}
		p.mu.Lock()
		refuse := p.cut || p.closed
		p.mu.Unlock()
		if refuse {
			_ = c.Close()
			continue
		}
		p.wg.Add(1)
		go p.forward(c)
	}
}

// forward dials the upstream for client c and copies both ways until
// either side closes or the proxy cuts the pair.
func (p *Proxy) forward(c net.Conn) {
	defer p.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	var d net.Dialer
	s, err := d.DialContext(ctx, "tcp", p.upstream)
	cancel()
	if err != nil {
		_ = c.Close()
		return
	}
	pr := &pair{client: c, server: s}
	p.mu.Lock()
	if p.cut || p.closed {
		p.mu.Unlock()
		pr.close()
		return
	}
	p.conns[pr] = struct{}{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _, _ = io.Copy(s, c); pr.close() }()
	go func() { defer wg.Done(); _, _ = io.Copy(c, s); pr.close() }()
	wg.Wait()
	p.mu.Lock()
	delete(p.conns, pr)
	p.mu.Unlock()
}

// RewriteDSN returns dsn (a postgres:// URL) with its host and port
// replaced by addr, so that a client opened with it goes through the
// proxy.
func RewriteDSN(dsn, addr string) (string, error) {
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		return "", fmt.Errorf("faultlab: DSN is not a postgres:// URL")
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("faultlab: parsing the DSN: %w", err)
	}
	u.Host = addr
	return u.String(), nil
}

// Upstream returns the host:port of a postgres:// URL (127.0.0.1:5432
// when the URL names none).
func Upstream(dsn string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("faultlab: parsing the DSN: %w", err)
	}
	host, port := u.Hostname(), u.Port()
	if host == "" {
		host = "127.0.0.1"
	}
	if port == "" {
		port = "5432"
	}
	return net.JoinHostPort(host, port), nil
}
