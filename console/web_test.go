//go:build linux

package console_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/anvilmetal/anvil/console"
)

// serve mounts the Manager's Handler under /console/ as an embedder
// would.
func serve(t *testing.T, m *console.Manager) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/console/", http.StripPrefix("/console/", m.Handler()))
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.ReadHeaderTimeout = 5 * time.Second
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestPageAssetsAndTokens(t *testing.T) {
	clk := newManualClock()
	m, logs := newManager(t, console.Options{Clock: clk, TokenTTL: time.Minute})
	start(t, m, console.Spec{NodeUUID: "web-1", Command: helper("machine")})
	start(t, m, console.Spec{NodeUUID: "web-2", Command: helper("machine")})
	srv := serve(t, m)
	base := srv.URL + "/console/"
	rw, err := m.IssueToken("web-1", console.ReadWrite)
	if err != nil {
		t.Fatal(err)
	}
	ro, err := m.IssueToken("web-1", console.ReadOnly)
	if err != nil {
		t.Fatal(err)
	}
	if len(rw.Value) < 22 || rw.Value == ro.Value || rw.NodeUUID != "web-1" || !rw.Expires.Equal(clk.Now().Add(time.Minute)) {
		t.Fatalf("tokens %+v, %+v", rw, ro)
	}
	if _, err := m.IssueToken("not-running", console.ReadOnly); !errors.Is(err, console.ErrNoSession) {
		t.Fatalf("IssueToken for a node without console: %v", err)
	}

	tests := []struct {
		name string
		path string
		code int
		want string
	}{
		{"page read-write", "web-1?token=" + rw.Value, 200, `data-mode="read-write"`},
		{"page read-only", "web-1?token=" + ro.Value, 200, `data-mode="read-only"`},
		{"xterm.js", "assets/vendor/xterm/xterm.js", 200, "xterm"},
		{"fit addon", "assets/vendor/xterm/addon-fit.js", 200, "FitAddon"},
		{"xterm.css", "assets/vendor/xterm/xterm.css", 200, ".xterm"},
		{"own script", "assets/console.js", 200, "new WebSocket"},
		{"template not an asset", "assets/index.html", 404, ""},
		{"no directory listing", "assets/vendor/", 404, ""},
		{"no token", "web-1", 403, console.ErrTokenInvalid.Error()},
		{"wrong token", "web-1?token=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", 403, console.ErrTokenInvalid.Error()},
		{"other node's token", "web-2?token=" + rw.Value, 403, console.ErrTokenInvalid.Error()},
		{"other node's token on the socket", "web-2/ws?token=" + rw.Value, 403, console.ErrTokenInvalid.Error()},
		{"unknown node", "web-9?token=" + rw.Value, 404, console.ErrNoSession.Error()},
		{"unknown path", "web-1/other?token=" + rw.Value, 404, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := get(t, base+tt.path)
			if code != tt.code || !strings.Contains(body, tt.want) {
				t.Fatalf("GET %s: %d %q, want %d with %q", tt.path, code, body, tt.code, tt.want)
			}
		})
	}
	resp, err := http.Get(base + "web-1?token=" + rw.Value)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("Referrer-Policy") != "no-referrer" || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("page headers %v", resp.Header)
	}

	clk.Advance(time.Minute)
	if code, body := get(t, base+"web-1?token="+rw.Value); code != 403 || !strings.Contains(body, console.ErrTokenInvalid.Error()) {
		t.Fatalf("expired token: %d %q", code, body)
	}
	if strings.Contains(logs.String(), rw.Value) || strings.Contains(logs.String(), ro.Value) {
		t.Fatal("a token was logged")
	}
	// Stop revokes the node's tokens.
	tok, _ := m.IssueToken("web-2", console.ReadOnly)
	if err := m.Stop(context.Background(), "web-2"); err != nil {
		t.Fatal(err)
	}
	start(t, m, console.Spec{NodeUUID: "web-2", Command: helper("machine")})
	if code, _ := get(t, base+"web-2?token="+tok.Value); code != 403 {
		t.Fatalf("token after Stop and Start: %d, want 403", code)
	}
}

func dialWS(t *testing.T, srv *httptest.Server, node string, tok console.Token) (*websocket.Conn, *reader) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	url := "ws" + strings.TrimPrefix(srv.URL, "http") + "/console/" + node + "/ws?token=" + tok.Value
	c, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.CloseNow() })
	return c, collect(&wsStream{c: c})
}

// wsStream reads a socket's messages as one byte stream, ending with the
// socket's own error (so a test sees the close status and reason, which
// websocket.NetConn turns into io.EOF).
type wsStream struct {
	c       *websocket.Conn
	pending []byte
}

func (w *wsStream) Read(p []byte) (int, error) {
	for len(w.pending) == 0 {
		_, data, err := w.c.Read(context.Background())
		if err != nil {
			return 0, err
		}
		w.pending = data
	}
	n := copy(p, w.pending)
	w.pending = w.pending[n:]
	return n, nil
}

func send(t *testing.T, c *websocket.Conn, s string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := c.Write(ctx, websocket.MessageBinary, []byte(s)); err != nil {
		t.Fatal(err)
	}
}

func TestWebSocketConsole(t *testing.T) {
	m, _ := newManager(t, console.Options{})
	info := start(t, m, console.Spec{NodeUUID: "ws-1", Command: helper("machine")})
	waitTranscript(m, "ws-1", "machine> ", wait)
	srv := serve(t, m)
	rwTok, _ := m.IssueToken("ws-1", console.ReadWrite)
	roTok, _ := m.IssueToken("ws-1", console.ReadOnly)

	writer, wr := dialWS(t, srv, "ws-1", rwTok)
	viewer, vr := dialWS(t, srv, "ws-1", roTok)
	// Once the viewer's socket is attached, the writer's line reaches both.
	time.Sleep(100 * time.Millisecond)
	send(t, writer, "hello ws\r")
	wr.waitFor(t, "machine got: HELLO WS", wait)
	vr.waitFor(t, "machine got: HELLO WS", wait)

	// A read-only socket's bytes reach nothing.
	send(t, viewer, "evil\r")
	send(t, writer, "after\r")
	wr.waitFor(t, "machine got: AFTER", wait)
	if in, out := inputOf(m, "ws-1"), outputOf(m, "ws-1"); strings.Contains(in, "evil") || strings.Contains(out, "EVIL") {
		t.Fatalf("a read-only socket wrote: input %q output %q", in, out)
	}

	// The keyboard is taken: a second writer socket is closed with the
	// reason, a TCP client refused in one line.
	_, second := dialWS(t, srv, "ws-1", rwTok)
	err := second.waitEnd(t, wait)
	if websocket.CloseStatus(err) != websocket.StatusPolicyViolation || !strings.Contains(err.Error(), "another client is attached read-write") {
		t.Fatalf("second writer socket: %v", err)
	}
	_, tcp := dial(t, info)
	tcp.waitEnd(t, wait)
	if tcp.String() != console.ErrWriterBusy.Error()+"\r\n" {
		t.Fatalf("TCP client while a socket writes: %q", tcp.String())
	}

	// A message beyond the read limit ends that socket only.
	big, bigr := dialWS(t, srv, "ws-1", roTok)
	send(t, big, strings.Repeat("x", 1<<20))
	if err := bigr.waitEnd(t, wait); websocket.CloseStatus(err) != websocket.StatusMessageTooBig {
		t.Fatalf("oversized message: %v", err)
	}

	if err := m.Stop(context.Background(), "ws-1"); err != nil {
		t.Fatal(err)
	}
	for _, r := range []*reader{wr, vr} {
		err := r.waitEnd(t, wait)
		if websocket.CloseStatus(err) != websocket.StatusGoingAway || !strings.Contains(err.Error(), "console stopped") {
			t.Fatalf("socket after Stop: %v", err)
		}
	}
}

func TestWebSocketIdleTimeout(t *testing.T) {
	clk := newManualClock()
	m, _ := newManager(t, console.Options{Clock: clk, IdleTimeout: time.Minute})
	start(t, m, console.Spec{NodeUUID: "ws-2", Command: helper("machine")})
	srv := serve(t, m)
	tok, _ := m.IssueToken("ws-2", console.ReadOnly)
	_, r := dialWS(t, srv, "ws-2", tok)
	waitWaiters(t, clk, 1)
	clk.Advance(time.Minute)
	err := r.waitEnd(t, wait)
	if !strings.Contains(err.Error(), "idle timeout") {
		t.Fatalf("idle socket: %v", err)
	}
	if _, ok := m.Info("ws-2"); !ok {
		t.Fatal("the console stopped with its idle client")
	}
}
