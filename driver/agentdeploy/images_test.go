package agentdeploy_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/agentclient/agenttest"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/imagecache"
	"github.com/anvilmetal/anvil/imagecache/oci"
	"github.com/anvilmetal/anvil/imagecache/oci/ocitest"
	"github.com/anvilmetal/anvil/steps"
)

// imageLab is an origin, the conductor's image cache mounted on a test
// server at /images/, and a fake IPA over HTTP.
type imageLab struct {
	origin    *httptest.Server
	originGET atomic.Int64
	cache     *imagecache.Cache
	conductor *httptest.Server
	agent     *agenttest.Agent
	agentURL  string
	client    *agentclient.Client
	img       []byte
}

func newImageLab(t *testing.T, o imagecache.Options) *imageLab {
	t.Helper()
	l := &imageLab{img: bytes.Repeat([]byte("whole disk "), 20000)}
	l.origin = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.originGET.Add(1)
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(l.img))
	}))
	t.Cleanup(l.origin.Close)
	mux := http.NewServeMux()
	l.conductor = httptest.NewServer(mux)
	t.Cleanup(l.conductor.Close)
	o.Dir = t.TempDir()
	o.URLBase = l.conductor.URL + "/images/"
	var err error
	if l.cache, err = imagecache.New(o); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.cache.Close() })
	mux.Handle("/images/", l.cache.Handler())
	l.agent = agenttest.NewAgent(agenttest.AgentConfig{Token: "tok"})
	t.Cleanup(l.agent.Close)
	as := httptest.NewServer(l.agent)
	t.Cleanup(as.Close)
	l.agentURL = as.URL
	if l.client, err = agentclient.NewClient(agentclient.ClientConfig{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.client.Close)
	return l
}

func (l *imageLab) task(ii, di map[string]any) *driver.Task {
	return &driver.Task{NodeUUID: "node-1", ProvisionState: "deploying", InstanceInfo: ii, DriverInfo: di,
		Properties:         map[string]any{"cpu_arch": "x86_64"},
		DriverInternalInfo: map[string]any{driver.InternalAgentURL: l.agentURL, driver.InternalAgentToken: "tok"}}
}

// waitIdle waits until the agent finished every command it accepted and
// returns them. write_image runs asynchronously on the agent, and IPA
// answers a new command with 409 (agent busy) while one runs: the next
// step must wait for it, as the conductor waits for the agent's
// heartbeat. The deadline is generous; a loaded machine only delays the
// finish.
func (l *imageLab) waitIdle(t *testing.T) []agenttest.Execution {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ex := l.agent.Executed()
		idle := true
		for _, e := range ex {
			if !e.Status.Done() {
				idle = false
			}
		}
		if idle {
			return ex
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent still runs a command after 30 s: %+v", ex)
		}
		select {
		case <-l.agent.CommandFinished():
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// writeImage runs Prepare and write_image and returns the image_info the
// agent received.
func (l *imageLab) writeImage(t *testing.T, d *agentdeploy.Direct, task *driver.Task) map[string]any {
	t.Helper()
	ctx := context.Background()
	if err := d.Validate(ctx, task); err != nil {
		t.Fatal(err)
	}
	if err := d.Prepare(ctx, task); err != nil {
		t.Fatal(err)
	}
	if _, err := d.ExecuteStep(ctx, task, steps.Deploy, steps.Step{Interface: "deploy", Name: agentdeploy.StepWriteImage}); err != nil {
		t.Fatal(err)
	}
	ex := l.waitIdle(t)
	if len(ex) == 0 || ex[len(ex)-1].Step == nil {
		t.Fatalf("the agent got no step: %+v", ex)
	}
	info, _ := ex[len(ex)-1].Step.Args["image_info"].(map[string]any)
	if err := agenttest.ValidateImageInfo(info); err != nil {
		t.Fatalf("IPA would refuse image_info %v: %v", info, err)
	}
	return info
}

func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func hexSHA256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestLocalDownloadSource: image_download_source local (per node, and
// per conductor) sends the agent the cache's URL for the node with the
// served file's SHA-256; the URL expires when the image is written.
func TestLocalDownloadSource(t *testing.T) {
	l := newImageLab(t, imagecache.Options{})
	sum := hexSHA256(l.img)
	for _, tc := range []struct {
		name     string
		conf     string
		ii, di   map[string]any
		expected bool // the cache serves it
	}{
		{"instance_info", "http", map[string]any{"image_download_source": "local"}, nil, true},
		{"driver_info", "http", nil, map[string]any{"image_download_source": "local"}, true},
		{"conductor", "local", nil, nil, true},
		{"instance_info overrides the conductor", "local", map[string]any{"image_download_source": "http"}, nil, false},
		{"instance_info overrides driver_info", "http", map[string]any{"image_download_source": "http"}, map[string]any{"image_download_source": "local"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := agentdeploy.NewWithOptions(l.client, agentdeploy.Options{Images: l.cache, ImageDownloadSource: tc.conf})
			ii := map[string]any{"image_source": l.origin.URL + "/disk.img", "image_checksum": sum}
			for k, v := range tc.ii {
				ii[k] = v
			}
			task := l.task(ii, tc.di)
			info := l.writeImage(t, d, task)
			urls, _ := info["urls"].([]any)
			u, _ := urls[0].(string)
			if !tc.expected {
				if u != l.origin.URL+"/disk.img" || info["checksum"] != sum {
					t.Fatalf("http: image_info %v, want the origin's URL and image_checksum", info)
				}
				return
			}
			if !strings.HasPrefix(u, l.conductor.URL+"/images/") || info["os_hash_algo"] != "sha256" || info["os_hash_value"] != sum || info["checksum"] != nil || info["disk_format"] != "raw" {
				t.Fatalf("local: image_info %v", info)
			}
			code, body := get(t, u)
			if code != http.StatusOK || !bytes.Equal(body, l.img) {
				t.Fatalf("the agent's URL gave %d, %d bytes", code, len(body))
			}
			if _, err := d.ExecuteStep(context.Background(), task, steps.Deploy, steps.Step{Interface: "deploy", Name: agentdeploy.StepPrepareInstanceBoot}); err != nil {
				t.Fatal(err)
			}
			if code, _ := get(t, u); code != http.StatusNotFound {
				t.Fatalf("after the image was written the URL answers %d, want 404", code)
			}
		})
	}
	if n := l.originGET.Load(); n != 1 {
		t.Fatalf("the origin was read %d times for three local deploys, want 1", n)
	}
}

// TestLocalRefusals: local without a cache, swift, a download failure.
func TestLocalRefusals(t *testing.T) {
	l := newImageLab(t, imagecache.Options{})
	ctx := context.Background()
	ii := map[string]any{"image_source": l.origin.URL + "/disk.img", "image_checksum": hexSHA256(l.img), "image_download_source": "local"}
	var ie *driver.InvalidParameterError
	if err := agentdeploy.New(nil).Validate(ctx, l.task(ii, nil)); !errors.As(err, &ie) || ie.Key != "image_download_source" || !strings.Contains(ie.Expected, "no image cache") {
		t.Fatalf("local without a cache: %v", err)
	}
	d := agentdeploy.NewWithOptions(l.client, agentdeploy.Options{Images: l.cache, ImageDownloadSource: "swift"})
	if err := d.Validate(ctx, l.task(map[string]any{"image_source": l.origin.URL + "/disk.img", "image_checksum": hexSHA256(l.img)}, nil)); !errors.As(err, &ie) || ie.Field != "conductor [agent]" {
		t.Fatalf("swift: %v", err)
	}
	d = agentdeploy.NewWithOptions(l.client, agentdeploy.Options{Images: l.cache})
	var me *driver.MissingParameterError
	if err := d.Validate(ctx, l.task(map[string]any{"image_source": l.origin.URL + "/disk.img", "image_download_source": "local"}, nil)); !errors.As(err, &me) {
		t.Fatalf("local without a checksum: %v", err)
	}
	bad := map[string]any{"image_source": l.origin.URL + "/disk.img", "image_checksum": strings.Repeat("1", 64), "image_download_source": "local"}
	err := d.Prepare(ctx, l.task(bad, nil))
	var imgErr *agentdeploy.ImageError
	if !errors.As(err, &imgErr) || !errors.Is(err, imagecache.ErrChecksum) || imgErr.Node != "node-1" {
		t.Fatalf("a bad checksum at prepare: %v, want an *ImageError wrapping ErrChecksum", err)
	}
}

// TestOCISources: an oci:// image in the real registry, through the
// cache (local) with the node's pull secret, or straight to the agent
// (http) from an anonymous registry with the digest as checksum.
func TestOCISources(t *testing.T) {
	ctx := context.Background()
	img := bytes.Repeat([]byte("oci whole disk "), 10000)
	push := func(reg *ocitest.Registry) ocitest.Descriptor {
		m, blob, err := reg.PushArtifact(ctx, "os/disk", "", ocitest.Layer{Content: img, Title: "disk.raw"}, false)
		if err != nil {
			t.Fatal(err)
		}
		m.Annotations = map[string]string{oci.DiskTypeAnnotation: "raw"}
		m.Platform = &ocitest.Platform{Architecture: "amd64", OS: "linux"}
		if _, err := reg.PushIndex(ctx, "os/disk", "v1", []ocitest.Descriptor{m}, false); err != nil {
			t.Fatal(err)
		}
		return blob
	}
	resolver := oci.NewResolver(oci.Options{PermitHTTPFallback: true})

	private := ocitest.Start(t, ocitest.Options{Auth: ocitest.Token, Username: "u", Password: "p", PreSharedToken: "node-secret"})
	blob := push(private)
	l := newImageLab(t, imagecache.Options{OCI: resolver})
	d := agentdeploy.NewWithOptions(l.client, agentdeploy.Options{Images: l.cache, OCI: resolver, ImageDownloadSource: "local"})
	src := "oci://" + private.Host + "/os/disk:v1"
	info := l.writeImage(t, d, l.task(map[string]any{"image_source": src, "image_pull_secret": "node-secret"}, nil))
	if info["os_hash_value"] != hexSHA256(img) || info["id"] != "disk:v1" {
		t.Fatalf("image_info %v", info)
	}
	_, body := get(t, info["urls"].([]any)[0].(string))
	if !bytes.Equal(body, img) {
		t.Fatal("served bytes differ")
	}
	// The pull secret may come from driver_info.
	l.writeImage(t, d, l.task(map[string]any{"image_source": src}, map[string]any{"image_pull_secret": "node-secret"}))
	if n, _ := private.BlobDownloads("os/disk", blob.Digest); n != 1 {
		t.Fatalf("registry blob downloads %d, want 1", n)
	}
	// http: the agent cannot authenticate, so the deploy is refused.
	dh := agentdeploy.NewWithOptions(l.client, agentdeploy.Options{Images: l.cache, OCI: resolver})
	if err := dh.Prepare(ctx, l.task(map[string]any{"image_source": src, "image_pull_secret": "node-secret"}, nil)); err != nil {
		t.Fatal(err) // nothing to do at prepare for http
	}
	_, err := dh.ExecuteStep(ctx, l.task(map[string]any{"image_source": src, "image_pull_secret": "node-secret"}, nil), steps.Deploy,
		steps.Step{Interface: "deploy", Name: agentdeploy.StepWriteImage})
	if err == nil || !strings.Contains(err.Error(), `image_download_source to "local"`) {
		t.Fatalf("http from a private registry: %v", err)
	}

	public := ocitest.Start(t, ocitest.Options{})
	pblob := push(public)
	info = l.writeImage(t, dh, l.task(map[string]any{"image_source": "oci://" + public.Host + "/os/disk:v1"}, nil))
	if info["urls"].([]any)[0] != "http://"+public.Host+"/v2/os/disk/blobs/"+pblob.Digest || info["os_hash_algo"] != "sha256" ||
		"sha256:"+info["os_hash_value"].(string) != pblob.Digest || info["disk_format"] != "raw" {
		t.Fatalf("http from a public registry: image_info %v", info)
	}
	// A malformed reference fails validation.
	var ie *driver.InvalidParameterError
	if err := dh.Validate(ctx, l.task(map[string]any{"image_source": "oci://reg/Bad"}, nil)); !errors.As(err, &ie) || ie.Key != "image_source" {
		t.Fatalf("bad reference: %v", err)
	}
}
