package agentclient

import (
	"crypto/tls"
	"log/slog"
	"net/http"
	"time"
)

// Defaults of ServerConfig. The agent endpoints are unauthenticated until
// the token check, so every phase of a request is bounded: a client that
// trickles its headers or body, or holds an idle connection, is cut off
// instead of holding a goroutine and its buffers for ever.
const (
	// DefaultReadHeaderTimeout bounds reading the request line and
	// headers; IPA sends them in one write.
	DefaultReadHeaderTimeout = 10 * time.Second
	// DefaultReadTimeout bounds reading a whole request, body included:
	// a 4 MiB inspection body needs about 35 s even at 1 Mbit/s.
	DefaultReadTimeout = 60 * time.Second
	// DefaultWriteTimeout bounds the time from the end of the request
	// headers to the end of the answer, which includes the backend's work
	// (a continue_inspection hand-over may wait for the node's lock).
	DefaultWriteTimeout = 60 * time.Second
	// DefaultIdleTimeout bounds how long a keep-alive connection may wait
	// for its next request. IPA heartbeats every 90 to 180 s and opens a
	// new connection when the old one is gone.
	DefaultIdleTimeout = 120 * time.Second
	// DefaultMaxHeaderBytes bounds the request line and headers together:
	// room for a lookup carrying MaxLookupAddresses MAC addresses
	// percent-encoded as IPA sends them (30 bytes each) and ordinary
	// headers.
	DefaultMaxHeaderBytes = 64 << 10
)

// ServerConfig configures NewServer. The zero value gives the defaults
// above; a field that is zero or negative takes its default, so no bound
// can be switched off by accident.
type ServerConfig struct {
	// Addr is the TCP address to listen on when the server is started
	// with ListenAndServe or ListenAndServeTLS.
	Addr string
	// ReadHeaderTimeout, ReadTimeout, WriteTimeout and IdleTimeout are
	// http.Server's fields of the same names.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	// MaxHeaderBytes bounds the request line and headers; a larger
	// request is answered 431.
	MaxHeaderBytes int
	// TLSConfig is the server's TLS configuration, or nil for plain HTTP
	// (or ListenAndServeTLS's own).
	TLSConfig *tls.Config
	// Logger receives the server's own errors (failed TLS handshakes,
	// accept errors) at warning level. Nil means slog.Default(), as
	// everywhere an embedder configures logging.
	Logger *slog.Logger
}

// NewServer returns an http.Server that serves h, typically a *Handler,
// with every timeout and the header size bounded (ServerConfig's
// defaults). Request bodies are bounded by the Handler itself. The caller
// owns the server: it starts it (Serve, ListenAndServe, ServeTLS) and
// stops it (Shutdown or Close).
func NewServer(h http.Handler, cfg ServerConfig) *http.Server {
	orDefault := func(d, def time.Duration) time.Duration {
		if d <= 0 {
			return def
		}
		return d
	}
	srv := &http.Server{
		Addr:              cfg.Addr,
		Handler:           h,
		TLSConfig:         cfg.TLSConfig,
		ReadHeaderTimeout: orDefault(cfg.ReadHeaderTimeout, DefaultReadHeaderTimeout),
		ReadTimeout:       orDefault(cfg.ReadTimeout, DefaultReadTimeout),
		WriteTimeout:      orDefault(cfg.WriteTimeout, DefaultWriteTimeout),
		IdleTimeout:       orDefault(cfg.IdleTimeout, DefaultIdleTimeout),
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
	}
	if srv.MaxHeaderBytes <= 0 {
		srv.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	srv.ErrorLog = slog.NewLogLogger(logger.Handler(), slog.LevelWarn)
	return srv
}
