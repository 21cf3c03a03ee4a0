package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// mediaServer serves [deploy]http_root over HTTP on
// [anvil]http_root_listen: the virtual media images the redfish plugin
// publishes there, for the BMCs to fetch at [deploy]http_url (what
// Metal3's httpd container does beside Ironic). It serves regular files
// only, with GET and HEAD (ranges included): no directory listing, no
// hidden file (a half-written image is a hidden temporary file).
type mediaServer struct {
	ln   net.Listener
	srv  *http.Server
	done chan error
}

// mediaHandler is mediaServer's handler over root.
func mediaHandler(root string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		p := path.Clean("/" + r.URL.Path)
		for _, part := range strings.Split(p, "/") {
			if strings.HasPrefix(part, ".") {
				http.NotFound(w, r)
				return
			}
		}
		local := filepath.Join(root, filepath.FromSlash(p))
		f, err := os.Open(local)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil || !st.Mode().IsRegular() {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, path.Base(p), st.ModTime(), f)
	})
}

// startMediaServer listens on addr and serves root.
func startMediaServer(addr, root string, log *slog.Logger) (*mediaServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("anvild: [anvil]http_root_listen: %w", err)
	}
	m := &mediaServer{ln: ln, done: make(chan error, 1), srv: &http.Server{
		Handler:           mediaHandler(root),
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}}
	go func() { m.done <- m.srv.Serve(ln) }()
	return m, nil
}

// Addr is where the server listens.
func (m *mediaServer) Addr() net.Addr { return m.ln.Addr() }

// Close stops the server, letting downloads in flight finish within
// ctx.
func (m *mediaServer) Close(ctx context.Context) error {
	err := m.srv.Shutdown(ctx)
	if err != nil {
		_ = m.srv.Close()
	}
	if serr := <-m.done; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// mediaShutdownTimeout bounds the wait for image downloads in flight at
// shutdown.
const mediaShutdownTimeout = 10 * time.Second
