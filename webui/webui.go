package webui

import (
	"embed"
	"encoding/json"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/baremetal/conductor"
	"github.com/anvilmetal/anvil/console"
)

// Defaults of Options.
const (
	DefaultPrefix     = "/ui"
	DefaultMaxStreams = 64
)

// Options configure the web UI.
type Options struct {
	// Conductor is the conductor whose fleet the UI shows; required.
	Conductor *conductor.Conductor
	// Prefix is the path the handler is mounted at, without a trailing
	// slash; default DefaultPrefix ("/ui"). Mount the handler at Prefix+"/".
	Prefix string
	// APIPath is where Ironic's REST API (package ironicapi) is mounted on
	// the same origin, "" for the root: the node page reads the node, its
	// ports and its history there and sends every action there.
	APIPath string
	// Consoles and ConsolePath, when both set, show a node's serial
	// console on its page: Consoles issues the page a token and
	// ConsolePath is where Consoles.Handler is mounted (with
	// http.StripPrefix), e.g. "/console".
	Consoles    *console.Manager
	ConsolePath string
	// MaxStreams bounds the live event streams served at once; default
	// DefaultMaxStreams. A browser beyond it gets 503 and retries.
	MaxStreams int
	// Logger receives the UI's logs; default slog.Default().
	Logger *slog.Logger
}

// Handler serves the web UI. It reads the fleet from the conductor's
// store and follows it with the conductor's Watch; it changes nothing:
// the pages send every action to the REST API, which calls the
// conductor's verbs.
type Handler struct {
	opts    Options
	c       *conductor.Conductor
	store   baremetal.Store
	log     *slog.Logger
	mux     *http.ServeMux
	streams chan struct{}
}

//go:embed web
var webFiles embed.FS

var pages = template.Must(template.ParseFS(webFiles, "web/fleet.html", "web/node.html"))

// New returns the web UI's handler.
func New(o Options) (*Handler, error) {
	if o.Conductor == nil {
		return nil, errors.New("webui: Options.Conductor is required")
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	o.Prefix = "/" + strings.Trim(o.Prefix, "/")
	o.APIPath = strings.TrimRight(o.APIPath, "/")
	o.ConsolePath = strings.TrimRight(o.ConsolePath, "/")
	if o.MaxStreams <= 0 {
		o.MaxStreams = DefaultMaxStreams
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	h := &Handler{opts: o, c: o.Conductor, store: o.Conductor.Store(), log: o.Logger, mux: http.NewServeMux(),
		streams: make(chan struct{}, o.MaxStreams)}
	sub, err := fs.Sub(webFiles, "web")
	if err != nil {
		return nil, err
	}
	assets := http.StripPrefix(o.Prefix+"/assets/", http.FileServerFS(sub))
	p := o.Prefix
	h.mux.HandleFunc("GET "+p+"/{$}", h.fleetPage)
	h.mux.HandleFunc("GET "+p+"/nodes/{node}", h.nodePage)
	h.mux.Handle("GET "+p+"/assets/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, ".html") || strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-cache")
		assets.ServeHTTP(w, r)
	}))
	h.mux.HandleFunc("GET "+p+"/api/fleet", h.fleet)
	h.mux.HandleFunc("GET "+p+"/api/events", h.events)
	h.mux.HandleFunc("GET "+p+"/api/nodes/{node}/timeline", h.timeline)
	h.mux.HandleFunc("GET "+p+"/api/nodes/{node}/console", h.consoleLink)
	return h, nil
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == h.opts.Prefix {
		http.Redirect(w, r, h.opts.Prefix+"/", http.StatusMovedPermanently)
		return
	}
	h.mux.ServeHTTP(w, r)
}

// pageData is what the page templates get: the paths the scripts use.
type pageData struct {
	Prefix, API, Console, Node string
}

func (h *Handler) pageHeaders(w http.ResponseWriter) {
	hdr := w.Header()
	hdr.Set("Content-Type", "text/html; charset=utf-8")
	hdr.Set("Cache-Control", "no-store")
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "same-origin")
	hdr.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "+
		"frame-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'self'")
}

func (h *Handler) data(node string) pageData {
	d := pageData{Prefix: h.opts.Prefix, API: h.opts.APIPath, Node: node}
	if h.opts.Consoles != nil && h.opts.ConsolePath != "" {
		d.Console = h.opts.ConsolePath
	}
	return d
}

func (h *Handler) fleetPage(w http.ResponseWriter, r *http.Request) {
	h.pageHeaders(w)
	_ = pages.ExecuteTemplate(w, "fleet.html", h.data(""))
}

func (h *Handler) nodePage(w http.ResponseWriter, r *http.Request) {
	n, err := h.store.GetNode(r.Context(), r.PathValue("node"))
	if err != nil {
		h.fail(w, err)
		return
	}
	h.pageHeaders(w)
	_ = pages.ExecuteTemplate(w, "node.html", h.data(n.UUID))
}

// fail answers err: 404 for what is not there, 500 (logged, not shown)
// for anything else.
func (h *Handler) fail(w http.ResponseWriter, err error) {
	if errors.Is(err, baremetal.ErrNotFound) {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	h.log.Warn("webui: request failed", "error", err)
	http.Error(w, "internal error; see the server's log", http.StatusInternalServerError)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(v)
}

// consoleLink answers whether the node's console runs in this process
// and, when it does, the address of its page with a fresh read-write
// token.
func (h *Handler) consoleLink(w http.ResponseWriter, r *http.Request) {
	n, err := h.store.GetNode(r.Context(), r.PathValue("node"))
	if err != nil {
		h.fail(w, err)
		return
	}
	out := struct {
		Enabled bool   `json:"enabled"`
		URL     string `json:"url,omitempty"`
		Reason  string `json:"reason,omitempty"`
	}{Enabled: n.ConsoleEnabled}
	switch {
	case h.opts.Consoles == nil || h.opts.ConsolePath == "":
		out.Reason = "this server shows no consoles"
	case !n.ConsoleEnabled:
		out.Reason = "the console is disabled"
	default:
		tok, err := h.opts.Consoles.IssueToken(n.UUID, console.ReadWrite)
		if err != nil {
			out.Reason = "the console does not run in this process (" + err.Error() + ")"
			break
		}
		out.URL = h.opts.ConsolePath + "/" + n.UUID + "?token=" + tok.Value
	}
	writeJSON(w, out)
}

// millis is t in milliseconds since the epoch, with microseconds as the
// fraction (0 for the zero time), as the scripts take times.
func millis(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.UnixMicro()) / 1000
}
