package agenttest

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/anvilmetal/anvil/clock"
)

// agentPathPrefix is where a shared Server mounts each agent.
const agentPathPrefix = "/agents/"

// ServerConfig configures a Server.
type ServerConfig struct {
	// Addr is the listen address. Empty means 127.0.0.1 on a free port.
	Addr string
	// Insecure serves plain HTTP. By default the server uses TLS with a
	// self-signed certificate, as IPA's auto-TLS does, because Ironic
	// requires TLS callbacks by default.
	Insecure bool
	// Clock dates the certificate. Nil means the system clock.
	Clock clock.Clock
}

// Server is a loopback listener serving fake agents. One Server can host
// many agents, each under its own path (/agents/{id}), so hundreds of
// simulated nodes share one port and one certificate; an agent registered
// with the empty id is served at the root, like a real IPA on port 9999.
// The agent URL a ramdisk reports in its heartbeat is Server.AgentURL(id):
// the server's base URL plus the agent's path.
type Server struct {
	ln       net.Listener
	srv      *http.Server
	base     string
	certPEM  string
	done     chan struct{}
	serveErr error

	mu     sync.RWMutex
	agents map[string]http.Handler
}

// NewServer starts a server. Close stops it.
func NewServer(cfg ServerConfig) (*Server, error) {
	addr := cfg.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	clk := cfg.Clock
	if clk == nil {
		clk = clock.System()
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("agenttest: listening on %s: %w", addr, err)
	}
	s := &Server{ln: ln, agents: map[string]http.Handler{}, done: make(chan struct{})}
	scheme := "http"
	if !cfg.Insecure {
		host, _, _ := net.SplitHostPort(ln.Addr().String())
		ip := net.ParseIP(host)
		if ip == nil {
			ip = net.IPv4(127, 0, 0, 1)
		}
		cert, pemText, err := SelfSignedCert(clk.Now(), ip)
		if err != nil {
			_ = ln.Close()
			return nil, err
		}
		s.certPEM = pemText
		ln = tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12})
		scheme = "https"
	}
	s.base = scheme + "://" + s.ln.Addr().String()
	// Handshake errors from clients that refuse the self-signed
	// certificate are expected in tests; they are not worth a log line.
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.serveErr = err
		}
	}()
	return s, nil
}

// URL is the server's base URL, e.g. https://127.0.0.1:40123.
func (s *Server) URL() string { return s.base }

// CertPEM is the server's certificate in PEM, empty for an insecure server:
// what a ramdisk sends as agent_verify_ca.
func (s *Server) CertPEM() string { return s.certPEM }

// AgentURL is the URL an agent registered under id is reached at.
func (s *Server) AgentURL(id string) string {
	if id == "" {
		return s.base
	}
	return s.base + agentPathPrefix + id
}

// Register serves h under id and returns its URL. It fails when the id is
// taken or contains a slash.
func (s *Server) Register(id string, h http.Handler) (string, error) {
	if strings.ContainsAny(id, "/?#") {
		return "", fmt.Errorf("agenttest: agent id %q must not contain / ? or #", id)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.agents[id]; ok {
		return "", fmt.Errorf("agenttest: agent id %q is already registered", id)
	}
	s.agents[id] = h
	return s.AgentURL(id), nil
}

// Unregister stops serving the agent under id; its URL then answers 404.
func (s *Server) Unregister(id string) {
	s.mu.Lock()
	delete(s.agents, id)
	s.mu.Unlock()
}

// ServeHTTP dispatches to the agent named by the path.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, rest := "", r.URL.Path
	if after, ok := strings.CutPrefix(r.URL.Path, agentPathPrefix); ok {
		id, rest, _ = strings.Cut(after, "/")
		rest = "/" + rest
	}
	s.mu.RLock()
	h, ok := s.agents[id]
	s.mu.RUnlock()
	if !ok {
		fault(w, http.StatusNotFound, "404 Not Found: The requested URL was not found on the server.")
		return
	}
	r2 := r.Clone(r.Context())
	r2.URL.Path = rest
	r2.URL.RawPath = ""
	h.ServeHTTP(w, r2)
}

// Close stops the server and closes every connection.
func (s *Server) Close() error {
	err := s.srv.Close()
	<-s.done
	if err == nil {
		err = s.serveErr
	}
	return err
}
