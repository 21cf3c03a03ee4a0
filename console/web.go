package console

import (
	"bufio"
	"context"
	"crypto/sha256"
	"embed"
	"errors"
	"html/template"
	"io"
	"io/fs"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/coder/websocket"
)

const (
	// wsReadLimit bounds one message from a browser: keystrokes and
	// pastes, never more.
	wsReadLimit = 64 << 10
	// wsWriteTimeout bounds one message to a browser; a browser that
	// stops reading is dropped when its buffer overflows anyway.
	wsWriteTimeout = 10 * time.Second
	// wsHandshakeTimeout bounds writing the upgrade response; reading
	// the request is bounded by the embedder's http.Server
	// (ReadHeaderTimeout).
	wsHandshakeTimeout = 10 * time.Second
)

// webFiles holds the page, its script and style and the vendored
// xterm.js.
//
//go:embed web
var webFiles embed.FS

// pageTemplate is the page of one node's console.
var pageTemplate = template.Must(template.ParseFS(webFiles, "web/index.html"))

// webHandler serves Manager.Handler.
type webHandler struct {
	m      *Manager
	assets http.Handler
}

// Handler serves the browser page (GET {node-uuid}?token=T), its assets
// (GET assets/...) and the WebSocket (GET {node-uuid}/ws?token=T, binary
// messages of plain bytes both ways) under the prefix it is mounted at
// with http.StripPrefix. An unknown node or a node without a running
// console is 404; a missing, expired or other node's token is 403.
func (m *Manager) Handler() http.Handler {
	sub, err := fs.Sub(webFiles, "web")
	if err != nil {
		panic(err) // the embedded tree always has web/
	}
	return &webHandler{m: m, assets: http.FileServerFS(sub)}
}

func (h *webHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, "/")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if rest, ok := strings.CutPrefix(path, "assets/"); ok {
		if rest == "index.html" || rest == "" || strings.HasSuffix(rest, "/") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("X-Content-Type-Options", "nosniff")
		r2 := r.Clone(r.Context())
		r2.URL.Path, r2.URL.RawPath = "/"+rest, ""
		h.assets.ServeHTTP(w, r2)
		return
	}
	node, sub, _ := strings.Cut(path, "/")
	if node == "" || (sub != "" && sub != "ws") {
		http.NotFound(w, r)
		return
	}
	s := h.m.running(node)
	if s == nil {
		http.Error(w, ErrNoSession.Error(), http.StatusNotFound)
		return
	}
	mode, err := h.m.checkToken(r.URL.Query().Get("token"), node)
	if err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	if sub == "ws" {
		h.serveWebSocket(w, r, s, mode)
		return
	}
	hdr := w.Header()
	hdr.Set("Content-Type", "text/html; charset=utf-8")
	hdr.Set("Cache-Control", "no-store")
	// The token is in the address: no Referer may carry it away.
	hdr.Set("Referrer-Policy", "no-referrer")
	hdr.Set("X-Content-Type-Options", "nosniff")
	// xterm.js sets its theme through a style element it creates.
	hdr.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'")
	_ = pageTemplate.Execute(w, struct {
		Node string
		Mode string
	}{node, mode.String()})
}

// serveWebSocket connects a browser to the session as a client of mode.
func (h *webHandler) serveWebSocket(w http.ResponseWriter, r *http.Request, s *session, mode Mode) {
	hw := &hijackWatch{ResponseWriter: w}
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(wsHandshakeTimeout))
	conn, err := websocket.Accept(hw, r, nil) // same-origin only, the default
	if hw.conn != nil {
		_ = hw.conn.SetDeadline(time.Time{})
	}
	if err != nil {
		return // Accept answered the request
	}
	conn.SetReadLimit(wsReadLimit)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The client's end needs no hook here: the loop below sees it and
	// closes the socket with the reason, which ends the reader.
	c, err := s.attach(mode, nil)
	if err != nil {
		_ = conn.Close(websocket.StatusPolicyViolation, closeReason(err))
		return
	}
	defer c.Close()
	keys := make(chan struct{})
	go func() {
		defer close(keys)
		defer c.Close()
		for {
			_, data, err := conn.Read(ctx)
			if err != nil {
				return
			}
			if mode != ReadWrite {
				continue // a viewer's keys reach nothing
			}
			if _, err := c.Write(data); err != nil {
				return
			}
		}
	}()
	status, reason := websocket.StatusNormalClosure, "console closed"
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			wctx, wcancel := context.WithTimeout(ctx, wsWriteTimeout)
			werr := conn.Write(wctx, websocket.MessageBinary, buf[:n])
			wcancel()
			if werr != nil {
				break
			}
		}
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				status, reason = websocket.StatusGoingAway, closeReason(err)
			}
			break
		}
	}
	_ = conn.Close(status, reason)
	cancel()
	<-keys
}

// closeReason is the WebSocket close reason the page shows.
func closeReason(err error) string {
	switch {
	case errors.Is(err, io.EOF):
		return "console stopped"
	case errors.Is(err, ErrIdleTimeout):
		return "idle timeout"
	case errors.Is(err, ErrClientTooSlow):
		return "too far behind the output"
	case errors.Is(err, ErrWriterBusy):
		return "another client is attached read-write"
	}
	return "console closed"
}

// hijackWatch remembers the connection websocket.Accept hijacks, so the
// handshake's write deadline can be lifted afterwards.
type hijackWatch struct {
	http.ResponseWriter
	conn net.Conn
}

func (h *hijackWatch) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	h.conn = c
	return c, rw, err
}

// checkToken returns the mode a token grants on the node, or
// ErrTokenInvalid.
func (m *Manager) checkToken(value, nodeUUID string) (Mode, error) {
	if value == "" || len(value) > 256 {
		return 0, ErrTokenInvalid
	}
	key := sha256.Sum256([]byte(value))
	now := m.clock.Now()
	m.mu.Lock()
	e, ok := m.tokens[key]
	if ok && !now.Before(e.expires) {
		delete(m.tokens, key)
		ok = false
	}
	m.mu.Unlock()
	if !ok || e.node != nodeUUID {
		return 0, ErrTokenInvalid
	}
	return e.mode, nil
}
