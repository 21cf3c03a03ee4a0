package ramdisk

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
)

// index is a package index serving one release of the agent the way
// PyPI's JSON API does: the release's JSON (a wheel and the sdist) and
// the files. digest overrides the sdist's published SHA-256.
type index struct {
	sdist   []byte
	digest  string
	fetches atomic.Int32
}

func (ix *index) start(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewUnstartedServer(mux)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = ln
	sum := sha256.Sum256(ix.sdist)
	digest := hex.EncodeToString(sum[:])
	if ix.digest != "" {
		digest = ix.digest
	}
	mux.HandleFunc("GET /pypi/ironic-python-agent/9.4.3/json", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"info":{"version":"9.4.3"},"urls":[
{"packagetype":"bdist_wheel","filename":"ironic_python_agent-9.4.3-py3-none-any.whl","url":"http://%[1]s/files/x.whl","size":10,"digests":{"sha256":"%[2]s"}},
{"packagetype":"sdist","filename":"ironic-python-agent-9.4.3.tar.gz","url":"http://%[1]s/files/ironic-python-agent-9.4.3.tar.gz","size":%[3]d,"digests":{"md5":"x","sha256":"%[4]s"}}]}`,
			r.Host, strings.Repeat("a", 64), len(ix.sdist), digest)
	})
	mux.HandleFunc("GET /files/ironic-python-agent-9.4.3.tar.gz", func(w http.ResponseWriter, r *http.Request) {
		ix.fetches.Add(1)
		_, _ = w.Write(ix.sdist)
	})
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func TestFetchIPAVerifiesAndCaches(t *testing.T) {
	ix := &index{sdist: []byte("an sdist's bytes")}
	srv := ix.start(t)
	c := Cache{Dir: t.TempDir()}
	ctx := context.Background()
	path, err := FetchIPA(ctx, c, srv.Client(), srv.URL, "9.4.3")
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != string(ix.sdist) || !strings.HasSuffix(path, "/ironic-python-agent-9.4.3.tar.gz") {
		t.Fatalf("fetched %s: %q, %v", path, b, err)
	}
	again, err := FetchIPA(ctx, c, srv.Client(), srv.URL, "9.4.3")
	if err != nil || again != path || ix.fetches.Load() != 1 {
		t.Fatalf("second fetch = %s, %v after %d downloads; want the cached %s", again, err, ix.fetches.Load(), path)
	}
}

func TestFetchIPARefusesAWrongDigest(t *testing.T) {
	ix := &index{sdist: []byte("tampered"), digest: strings.Repeat("0", 64)}
	srv := ix.start(t)
	c := Cache{Dir: t.TempDir()}
	_, err := FetchIPA(context.Background(), c, srv.Client(), srv.URL, "9.4.3")
	if err == nil || !strings.Contains(err.Error(), "the index publishes "+strings.Repeat("0", 64)) || errors.Is(err, ErrUnavailable) {
		t.Fatalf("wrong digest: %v", err)
	}
	if entries, _ := os.ReadDir(c.Dir); len(entries) != 0 {
		t.Errorf("a refused download left %d entries in the cache", len(entries))
	}
}

func TestFetchIPAUnreachableSaysWhatToDo(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	_, err = FetchIPA(context.Background(), Cache{Dir: t.TempDir()}, nil, "http://"+addr, "9.4.3")
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "--ipa-tarball") {
		t.Fatalf("unreachable index: %v, want ErrUnavailable naming --ipa-tarball", err)
	}
}

func TestBuildRefusesBadOptions(t *testing.T) {
	c := Cache{Dir: t.TempDir()}
	for _, o := range []Options{
		{Cache: c, IPATarball: "x.tar.gz", Packages: []string{"ok-pkg", "bad;rm"}},
		{Cache: c, IPATarball: "x.tar.gz", IPAVersion: "9.4.3 --evil"},
		{IPATarball: "x.tar.gz"},
	} {
		if _, err := Build(context.Background(), o); err == nil || errors.Is(err, ErrUnavailable) {
			t.Errorf("Build(%+v) = %v, want a plain error about the option", o, err)
		}
	}
}
