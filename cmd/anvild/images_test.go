package main

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestImageOptions: the image cache's options under Ironic's names.
func TestImageOptions(t *testing.T) {
	c, err := parseConfig(nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Images.DownloadSource != "http" || !c.Images.ForceRaw || c.Images.SizeMiB != 20480 || c.Images.TTL != 7*24*time.Hour ||
		c.Images.ConvertMemoryMiB != 2048 || c.Images.CleanUpInterval != time.Hour || c.Images.OCIHTTPFallback {
		t.Fatalf("defaults %+v", c.Images)
	}
	conf := writeConf(t, `[DEFAULT]
force_raw_images = false
image_download_concurrency = 4
[agent]
image_download_source = local
[pxe]
instance_master_path = /var/lib/anvil/images
image_cache_size = 1024
image_cache_ttl = 60
[conductor]
cache_clean_up_interval = 600
permitted_image_formats = raw, qcow2
allow_md5_checksum = true
[disk_utils]
image_convert_memory_limit = 512
image_convert_attempts = 2
[oci]
permit_fallback_to_http_transport = true
authentication_config = /etc/anvil/oci-auth.json
`)
	c, err = parseConfig([]string{"--config-file", conf}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := imageConfig{DownloadSource: "local", ForceRaw: false, Concurrency: 4, Dir: "/var/lib/anvil/images", SizeMiB: 1024, TTL: time.Hour,
		CleanUpInterval: 10 * time.Minute, PermittedFormats: []string{"raw", "qcow2"}, AllowMD5: true, ConvertMemoryMiB: 512, ConvertAttempts: 2,
		OCIHTTPFallback: true, OCIAuthConfig: "/etc/anvil/oci-auth.json"}
	if !reflect.DeepEqual(c.Images, want) {
		t.Fatalf("parsed %+v\nwant %+v", c.Images, want)
	}
	if _, err := parseConfig([]string{"--image-download-source", "swift"}, nil, nil); err == nil || !strings.Contains(err.Error(), "[agent]image_download_source") {
		t.Fatalf("swift: %v", err)
	}
}

// TestAnvildImageEndpoint: with a reachable endpoint the cache serves
// /images/ beside the API (an unknown token is 404, the API answers);
// local without one stops anvild with the option named.
func TestAnvildImageEndpoint(t *testing.T) {
	d := startAnvild(t, "--public-endpoint", "http://127.0.0.1:6385", "--image-download-source", "local")
	hc := &http.Client{Timeout: 10 * time.Second}
	if code, _, _ := get(t, hc, d.URL+"/images/not-a-grant"); code != http.StatusNotFound {
		t.Fatalf("GET /images/<unknown>: %d, want 404", code)
	}
	if code, _, _ := get(t, hc, d.URL+"/v1"); code != http.StatusOK {
		t.Fatalf("GET /v1: %d", code)
	}
	if !strings.Contains(d.stderr.String(), "image cache") {
		t.Fatalf("no image cache log line:\n%s", d.stderr)
	}
}

// TestLocalNeedsReachableConductor: image_download_source local without
// an address agents can reach is refused at start.
func TestLocalNeedsReachableConductor(t *testing.T) {
	c, err := parseConfig([]string{"--image-download-source", "local", "--port", "0"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{}
	defer d.close(slog.New(slog.DiscardHandler))
	_, h, err := startImages(context.Background(), c, slog.New(slog.DiscardHandler), d)
	var ve *ConfigValueError
	if !errors.As(err, &ve) || ve.Section != "agent" || ve.Name != "image_download_source" || h != nil {
		t.Fatalf("err = %v, want a *ConfigValueError for [agent]image_download_source", err)
	}
}
