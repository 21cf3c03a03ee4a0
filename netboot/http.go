package netboot

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/anvilmetal/anvil/netboot/stage"
)

// Handler serves the boot files over HTTP (the layout is parsePath's):
// iPXE scripts, GRUB configurations, the MACs' kernels and ramdisks from
// local files, and the boot loader binaries for UEFI HTTP boot. Only GET
// and HEAD; only the exact paths of the layout (no directory listings,
// nothing else on disk can be named); Range requests as net/http's
// ServeContent answers them (a single range or several).
//
// A complete GET records a stage: stage.Script (stage.LocalBoot,
// stage.Fallback) for a MAC's script or configuration, stage.Kernel and
// stage.Ramdisk with the bytes sent and the duration, stage.File for the
// rest; a download the client broke off records its stage with the
// error. A kernel or ramdisk given as a URL is fetched by the machine
// from there, so the server records no download stage for it.
//
// The connection-level bounds (header size and read timeouts, the number
// of connections) are the embedder's http.Server's: set
// ReadHeaderTimeout and MaxHeaderBytes there.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if len(r.URL.Path) > maxPathLen || len(r.URL.RawQuery) > maxPathLen {
		http.Error(w, "path too long", http.StatusRequestURITooLong)
		return
	}
	rt := parsePath(r.URL.Path)
	if rt.kind == routeNone || r.URL.Path == "" || r.URL.Path[0] != '/' {
		http.NotFound(w, r)
		return
	}
	ctx := r.Context()
	sv, err := s.resolve(ctx, rt, remoteAddr(r))
	if err != nil {
		http.NotFound(w, r)
		return
	}
	start := s.clock.Now()
	cw := &countingWriter{ResponseWriter: w}
	name := r.URL.Path
	if sv.data != nil {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		http.ServeContent(cw, r, name, time.Time{}, bytes.NewReader(sv.data))
	} else {
		f, fi, err := openLocal(sv.path)
		if err != nil {
			s.log.WarnContext(ctx, "netboot: cannot open a file to serve", "path", name, "node", sv.node, "err", err)
			http.NotFound(w, r)
			return
		}
		defer f.Close()
		w.Header().Set("Content-Type", "application/octet-stream")
		http.ServeContent(cw, r, name, fi.ModTime(), f)
	}
	if r.Method != http.MethodGet || cw.status() >= 300 {
		return
	}
	rec := stage.Record{
		Node:     sv.node,
		MAC:      sv.mac,
		Stage:    sv.stage,
		At:       start,
		File:     name,
		Bytes:    cw.n,
		Duration: s.clock.Now().Sub(start),
	}
	remote := remoteAddr(r)
	if remote.IsValid() {
		rec.Addr = remote.String()
	}
	s.who(&rec, remote)
	if e := cw.incomplete(); e != "" {
		rec.Err = e
	} else if err := ctx.Err(); err != nil {
		rec.Err = "client went away: " + err.Error()
	}
	s.observe(rec)
}

func remoteAddr(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap()
}

// countingWriter counts what reaches the client and remembers the first
// write error (a client that disconnected).
type countingWriter struct {
	http.ResponseWriter
	code int
	n    int64
	err  error
}

func (w *countingWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *countingWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.n += int64(n)
	if err != nil && w.err == nil {
		w.err = err
	}
	return n, err
}

// ReadFrom keeps net/http's sendfile path for local files (ServeContent
// copies through io.Copy, which looks for it), counting as Write does.
func (w *countingWriter) ReadFrom(r io.Reader) (int64, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	var n int64
	var err error
	if rf, ok := w.ResponseWriter.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(r)
	} else {
		n, err = io.Copy(struct{ io.Writer }{w.ResponseWriter}, r)
	}
	w.n += n
	if err != nil && w.err == nil {
		w.err = err
	}
	return n, err
}

func (w *countingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *countingWriter) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}

// incomplete says why the body did not reach the client whole, or "".
func (w *countingWriter) incomplete() string {
	want, err := strconv.ParseInt(w.Header().Get("Content-Length"), 10, 64)
	if w.err != nil {
		if err == nil {
			return fmt.Sprintf("client disconnected after %d of %d bytes: %v", w.n, want, w.err)
		}
		return fmt.Sprintf("client disconnected after %d bytes: %v", w.n, w.err)
	}
	if err == nil && w.n < want {
		return fmt.Sprintf("client disconnected after %d of %d bytes", w.n, want)
	}
	return ""
}
