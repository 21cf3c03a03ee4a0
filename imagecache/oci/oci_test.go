package oci_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/imagecache/oci"
	"github.com/anvilmetal/anvil/imagecache/oci/ocitest"
)

func TestParseReference(t *testing.T) {
	d64 := strings.Repeat("ab", 32)
	tests := []struct {
		in   string
		want oci.Reference
		bad  string
	}{
		{in: "oci://quay.io/org/disk:1.0", want: oci.Reference{Registry: "quay.io", Repository: "org/disk", Tag: "1.0"}},
		{in: "oci://127.0.0.1:5000/disk", want: oci.Reference{Registry: "127.0.0.1:5000", Repository: "disk", Tag: "latest"}},
		{in: "oci://r.example/a/b/c@sha256:" + d64, want: oci.Reference{Registry: "r.example", Repository: "a/b/c", Digest: "sha256:" + d64}},
		{in: "oci://r.example/a:v2@sha256:" + d64, want: oci.Reference{Registry: "r.example", Repository: "a", Tag: "v2", Digest: "sha256:" + d64}},
		{in: "http://r.example/a", bad: "want oci://"},
		{in: "oci://r.example", bad: "registry host and a repository"},
		{in: "oci://r.example/a@sha256:abc", bad: "has 3 hex digits, want 64"},
		{in: "oci://r.example/a@md5:" + d64[:32], bad: "not sha256"},
		{in: "oci://r.example/a@sha256:" + strings.ToUpper(d64), bad: "lower-case hex"},
		{in: "oci://r.example/a:", bad: "empty tag"},
		{in: "oci://r.example/A/b", bad: "invalid"},
		{in: "oci://r.example//a", bad: "path of names"},
	}
	for _, tc := range tests {
		got, err := oci.ParseReference(tc.in)
		if tc.bad != "" {
			if !errors.Is(err, oci.ErrInvalidReference) || !strings.Contains(err.Error(), tc.bad) {
				t.Errorf("ParseReference(%q) = %v, want ErrInvalidReference with %q", tc.in, err, tc.bad)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseReference(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

// pushed is a registry with a multi-architecture, multi-format index:
// amd64 qcow2 and raw, arm64 raw, and a container entry.
type pushed struct {
	reg                     *ocitest.Registry
	amdRaw, amdQcow, armRaw ocitest.Descriptor // blobs
	indexDigest             string
	rawManifest             ocitest.Descriptor
}

func pushFixture(t *testing.T, reg *ocitest.Registry, repo string) pushed {
	t.Helper()
	ctx := context.Background()
	p := pushed{reg: reg}
	push := func(content, title string, docker bool) (ocitest.Descriptor, ocitest.Descriptor) {
		m, b, err := reg.PushArtifact(ctx, repo, "", ocitest.Layer{Content: []byte(content), Title: title}, docker)
		if err != nil {
			t.Fatal(err)
		}
		return m, b
	}
	var mAmdRaw, mAmdQcow, mArmRaw ocitest.Descriptor
	p.rawManifest, p.amdRaw = push("raw disk for amd64", "disk-amd64.raw", false)
	mAmdRaw = p.rawManifest
	mAmdQcow, p.amdQcow = push("QFI\xfb qcow2 for amd64", "disk-amd64.qcow2", false)
	mArmRaw, p.armRaw = push("raw disk for arm64", "disk-arm64.raw", true)
	// A container: two layers.
	ctr := []byte("layer one")
	if err := reg.PushBlob(ctx, repo, ocitest.Digest(ctr), int64(len(ctr)), bytes.NewReader(ctr)); err != nil {
		t.Fatal(err)
	}
	mCtr, _ := push("layer two", "", false)
	_ = mCtr
	entry := func(m ocitest.Descriptor, arch, disktype string) ocitest.Descriptor {
		m.Platform = &ocitest.Platform{Architecture: arch, OS: "linux"}
		if disktype != "" {
			m.Annotations = map[string]string{oci.DiskTypeAnnotation: disktype}
		}
		return m
	}
	var err error
	p.indexDigest, err = reg.PushIndex(ctx, repo, "v1", []ocitest.Descriptor{
		entry(mCtr, "amd64", ""), // no disktype: skipped
		entry(mAmdQcow, "amd64", "qcow2"),
		entry(mArmRaw, "arm64", "raw"),
		entry(mAmdRaw, "x86_64", "raw"),
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestResolveAgainstRegistry(t *testing.T) {
	reg := ocitest.Start(t, ocitest.Options{})
	p := pushFixture(t, reg, "images/disk")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := oci.NewResolver(oci.Options{PermitHTTPFallback: true})
	base := "oci://" + reg.Host + "/images/disk"
	tests := []struct {
		name       string
		req        oci.Request
		wantBlob   ocitest.Descriptor
		wantFormat string
		wantErr    error
	}{
		{"http prefers raw, amd64 matches x86_64", oci.Request{Ref: base + ":v1", CPUArch: "x86_64"}, p.amdRaw, "raw", nil},
		{"local prefers qcow2", oci.Request{Ref: base + ":v1", CPUArch: "x86_64", DownloadSource: "local"}, p.amdQcow, "qcow2", nil},
		{"arm64 from a Docker manifest", oci.Request{Ref: base + ":v1", CPUArch: "aarch64"}, p.armRaw, "raw", nil},
		{"no architecture: the first raw entry in index order", oci.Request{Ref: base + ":v1"}, p.armRaw, "raw", nil},
		{"the index pinned by digest", oci.Request{Ref: base + "@" + p.indexDigest, CPUArch: "amd64", DownloadSource: "local"}, p.amdQcow, "qcow2", nil},
		{"a manifest pinned by digest", oci.Request{Ref: base + "@" + p.rawManifest.Digest}, p.amdRaw, "unknown", nil},
		{"no such architecture", oci.Request{Ref: base + ":v1", CPUArch: "ppc64le"}, ocitest.Descriptor{}, "", oci.ErrNoDiskImage},
		{"no such tag", oci.Request{Ref: base + ":v9"}, ocitest.Descriptor{}, "", oci.ErrNotFound},
		{"no such repository", oci.Request{Ref: "oci://" + reg.Host + "/images/none:v1"}, ocitest.Descriptor{}, "", oci.ErrNotFound},
		{"swift", oci.Request{Ref: base + ":v1", DownloadSource: "swift"}, ocitest.Descriptor{}, "", oci.ErrInvalidReference},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := r.Resolve(ctx, tc.req)
			if tc.wantErr != nil {
				var oe *oci.Error
				if !errors.Is(err, tc.wantErr) || !errors.As(err, &oe) {
					t.Fatalf("Resolve = %v, want %v in an *oci.Error", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if a.Digest != tc.wantBlob.Digest || a.Size != tc.wantBlob.Size || a.DiskFormat != tc.wantFormat || !a.PlainHTTP || a.Authenticated {
				t.Fatalf("resolved %+v, want blob %s (%d bytes) format %s over HTTP anonymously", a, tc.wantBlob.Digest, tc.wantBlob.Size, tc.wantFormat)
			}
			if a.BlobURL != "http://"+reg.Host+"/v2/images/disk/blobs/"+a.Digest {
				t.Fatalf("blob URL %s", a.BlobURL)
			}
			rc, err := a.Open(ctx)
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(rc)
			rc.Close()
			if err != nil || ocitest.Digest(b) != a.Digest {
				t.Fatalf("blob read %d bytes (%v), digest %s, want %s", len(b), err, ocitest.Digest(b), a.Digest)
			}
		})
	}
	// A container image (two layers) named directly is not a disk image.
	ctr := []byte("ctr layer")
	if err := reg.PushBlob(ctx, "images/ctr", ocitest.Digest(ctr), int64(len(ctr)), bytes.NewReader(ctr)); err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.empty.v1+json","digest":"` +
		ocitest.Digest([]byte("{}")) + `","size":2},"layers":[{"mediaType":"application/octet-stream","digest":"` + ocitest.Digest(ctr) + `","size":9},{"mediaType":"application/octet-stream","digest":"` + ocitest.Digest(ctr) + `","size":9}]}`)
	if err := reg.PushBlob(ctx, "images/ctr", ocitest.Digest([]byte("{}")), 2, bytes.NewReader([]byte("{}"))); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.PushManifest(ctx, "images/ctr", "latest", "application/vnd.oci.image.manifest.v1+json", body); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Resolve(ctx, oci.Request{Ref: "oci://" + reg.Host + "/images/ctr"}); !errors.Is(err, oci.ErrNoDiskImage) || !strings.Contains(err.Error(), "2 layers") {
		t.Fatalf("a container: %v, want ErrNoDiskImage naming 2 layers", err)
	}
}

// TestHTTPOnlyWhenPermitted: a registry that speaks HTTP only is refused
// unless [oci]permit_fallback_to_http_transport is set.
func TestHTTPOnlyWhenPermitted(t *testing.T) {
	reg := ocitest.Start(t, ocitest.Options{})
	p := pushFixture(t, reg, "disk")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ref := "oci://" + reg.Host + "/disk@" + p.rawManifest.Digest
	_, err := oci.NewResolver(oci.Options{}).Resolve(ctx, oci.Request{Ref: ref})
	if !errors.Is(err, oci.ErrInsecureTransport) || !strings.Contains(err.Error(), "permit_fallback_to_http_transport") {
		t.Fatalf("without the fallback: %v, want ErrInsecureTransport naming the option", err)
	}
	a, err := oci.NewResolver(oci.Options{PermitHTTPFallback: true}).Resolve(ctx, oci.Request{Ref: ref})
	if err != nil || !a.PlainHTTP {
		t.Fatalf("with the fallback: %+v, %v", a, err)
	}
}

func TestTokenAuthentication(t *testing.T) {
	reg := ocitest.Start(t, ocitest.Options{Auth: ocitest.Token, Username: "pusher", Password: "push-pw", PreSharedToken: "pull-secret-1"})
	p := pushFixture(t, reg, "private/disk")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ref := "oci://" + reg.Host + "/private/disk:v1"

	// Anonymous: the token server refuses, so does the registry.
	r := oci.NewResolver(oci.Options{PermitHTTPFallback: true})
	if _, err := r.Resolve(ctx, oci.Request{Ref: ref}); !errors.Is(err, oci.ErrAuthentication) {
		t.Fatalf("anonymous: %v, want ErrAuthentication", err)
	}
	// A wrong pull secret.
	if _, err := r.Resolve(ctx, oci.Request{Ref: ref, PullSecret: "wrong"}); !errors.Is(err, oci.ErrAuthentication) {
		t.Fatalf("wrong secret: %v, want ErrAuthentication", err)
	}
	// The node's image_pull_secret, as Ironic sends it: Basic with an
	// empty user to the token realm, then Bearer to the registry.
	a, err := r.Resolve(ctx, oci.Request{Ref: ref, PullSecret: "pull-secret-1", CPUArch: "x86_64"})
	if err != nil {
		t.Fatal(err)
	}
	if a.Digest != p.amdRaw.Digest || !a.Authenticated {
		t.Fatalf("resolved %+v", a)
	}
	rc, err := a.Open(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(rc)
	rc.Close()
	if ocitest.Digest(b) != a.Digest {
		t.Fatalf("blob digest %s", ocitest.Digest(b))
	}
	// A base64 user:password secret (a config.json auth value).
	up := base64.StdEncoding.EncodeToString([]byte("pusher:push-pw"))
	if _, err := r.Resolve(ctx, oci.Request{Ref: ref, PullSecret: up}); err != nil {
		t.Fatalf("user:password secret: %v", err)
	}
	// The configured secret ([oci]authentication_config), re-read each
	// time.
	cfg := filepath.Join(t.TempDir(), "auth.json")
	rc2 := oci.NewResolver(oci.Options{PermitHTTPFallback: true, AuthenticationConfig: cfg})
	if _, err := rc2.Resolve(ctx, oci.Request{Ref: ref}); !errors.Is(err, oci.ErrAuthentication) {
		t.Fatalf("no config file yet: %v", err)
	}
	if err := os.WriteFile(cfg, []byte(`{"auths": {"`+reg.Host+`": {"auth": "pull-secret-1"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := rc2.Resolve(ctx, oci.Request{Ref: ref}); err != nil {
		t.Fatalf("configured secret: %v", err)
	}
	var preShared, granted int
	for _, tr := range reg.Tokens.Requests() {
		if tr.User == "" && tr.Granted {
			preShared++
		}
		if tr.Granted && strings.Contains(tr.Scope, "repository:private/disk:pull") {
			granted++
		}
	}
	if preShared == 0 || granted == 0 {
		t.Fatalf("token requests %+v: want grants for the pre-shared secret with the pull scope", reg.Tokens.Requests())
	}
}

func TestBasicAuthentication(t *testing.T) {
	reg := ocitest.Start(t, ocitest.Options{Auth: ocitest.Basic, Username: "alice", Password: "alice-pw"})
	p := pushFixture(t, reg, "disk")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := oci.NewResolver(oci.Options{PermitHTTPFallback: true})
	ref := "oci://" + reg.Host + "/disk:v1"
	if _, err := r.Resolve(ctx, oci.Request{Ref: ref}); !errors.Is(err, oci.ErrAuthentication) {
		t.Fatalf("anonymous: %v, want ErrAuthentication", err)
	}
	// A token alone cannot answer Basic: the registry wants a user.
	if _, err := r.Resolve(ctx, oci.Request{Ref: ref, PullSecret: "just-a-token"}); !errors.Is(err, oci.ErrAuthentication) {
		t.Fatalf("token against Basic: %v, want ErrAuthentication", err)
	}
	a, err := r.Resolve(ctx, oci.Request{Ref: ref, CPUArch: "amd64", PullSecret: base64.StdEncoding.EncodeToString([]byte("alice:alice-pw"))})
	if err != nil || a.Digest != p.amdRaw.Digest {
		t.Fatalf("user:password: %+v, %v", a, err)
	}
}
