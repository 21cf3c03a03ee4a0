package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"time"

	"github.com/anvilmetal/anvil/driver/agentdeploy"
	"github.com/anvilmetal/anvil/imagecache"
	"github.com/anvilmetal/anvil/imagecache/oci"
)

// imagesPath is where the image cache serves nodes' images on the API
// listener (the conductor's own HTTP endpoint agents already reach).
const imagesPath = "/images/"

// imageConfig is the image cache's and the direct deploy's
// configuration, with Ironic's option names.
type imageConfig struct {
	DownloadSource   string        // [agent]image_download_source
	ForceRaw         bool          // [DEFAULT]force_raw_images
	Concurrency      int           // [DEFAULT]image_download_concurrency
	Dir              string        // [pxe]instance_master_path
	SizeMiB          int           // [pxe]image_cache_size
	TTL              time.Duration // [pxe]image_cache_ttl (minutes)
	CleanUpInterval  time.Duration // [conductor]cache_clean_up_interval
	PermittedFormats []string      // [conductor]permitted_image_formats
	AllowMD5         bool          // [conductor]allow_md5_checksum
	ConvertMemoryMiB int           // [disk_utils]image_convert_memory_limit
	ConvertAttempts  int           // [disk_utils]image_convert_attempts
	OCIHTTPFallback  bool          // [oci]permit_fallback_to_http_transport
	OCIAuthConfig    string        // [oci]authentication_config
}

func defaultImageConfig() imageConfig {
	return imageConfig{DownloadSource: agentdeploy.ImageDownloadHTTP, ForceRaw: true, Concurrency: imagecache.DefaultConcurrency,
		SizeMiB: imagecache.DefaultMaxBytes >> 20, TTL: imagecache.DefaultTTL, CleanUpInterval: imagecache.DefaultCleanUpInterval,
		ConvertMemoryMiB: imagecache.DefaultConvertMemory >> 20, ConvertAttempts: imagecache.DefaultConvertAttempts}
}

// imageOptions are the options of imageConfig.
func imageOptions() []option {
	return []option{
		{"agent", "image_download_source", "image-download-source", "where agents get images: http (from its URL) or local (through this conductor's image cache) ([agent]image_download_source)",
			choice([]string{agentdeploy.ImageDownloadHTTP, agentdeploy.ImageDownloadLocal}, func(c *Config) *string { return &c.Images.DownloadSource })},
		{"DEFAULT", "force_raw_images", "", "", boolean(func(c *Config) *bool { return &c.Images.ForceRaw })},
		{"DEFAULT", "image_download_concurrency", "", "", integer(1, func(c *Config) *int { return &c.Images.Concurrency })},
		{"pxe", "instance_master_path", "", "", str(func(c *Config) *string { return &c.Images.Dir })},
		{"pxe", "image_cache_size", "", "", integer(1, func(c *Config) *int { return &c.Images.SizeMiB })},
		{"pxe", "image_cache_ttl", "", "", func(c *Config, v string) string {
			var m int
			if msg := integer(1, func(*Config) *int { return &m })(c, v); msg != "" {
				return "a whole number of minutes >= 1"
			}
			c.Images.TTL = time.Duration(m) * time.Minute
			return ""
		}},
		{"conductor", "cache_clean_up_interval", "", "", seconds(false, func(c *Config) *time.Duration { return &c.Images.CleanUpInterval })},
		{"conductor", "permitted_image_formats", "", "", list(func(c *Config) *[]string { return &c.Images.PermittedFormats })},
		{"conductor", "allow_md5_checksum", "", "", boolean(func(c *Config) *bool { return &c.Images.AllowMD5 })},
		{"disk_utils", "image_convert_memory_limit", "", "", integer(1, func(c *Config) *int { return &c.Images.ConvertMemoryMiB })},
		{"disk_utils", "image_convert_attempts", "", "", integer(1, func(c *Config) *int { return &c.Images.ConvertAttempts })},
		{"oci", "permit_fallback_to_http_transport", "", "", boolean(func(c *Config) *bool { return &c.Images.OCIHTTPFallback })},
		{"oci", "authentication_config", "", "", str(func(c *Config) *string { return &c.Images.OCIAuthConfig })},
	}
}

// startImages builds the direct deploy's options: the OCI resolver and,
// when agents can reach this process (agentAPIURL), the image cache
// mounted at imagesPath and cleaned up until ctx ends. The returned
// handler is nil without a cache.
func startImages(ctx context.Context, cfg *Config, log *slog.Logger, d *daemon) (agentdeploy.Options, http.Handler, error) {
	ic := cfg.Images
	resolver := oci.NewResolver(oci.Options{PermitHTTPFallback: ic.OCIHTTPFallback, AuthenticationConfig: ic.OCIAuthConfig})
	// [deploy]default_boot_mode is the direct deploy's as well as the
	// boot interfaces': it decides whether a whole-disk image gets
	// install_bootloader (UEFI boot entries).
	o := agentdeploy.Options{OCI: resolver, ImageDownloadSource: ic.DownloadSource, ForceRawImages: ic.ForceRaw,
		DefaultBootMode: cfg.PXE.DefaultBootMode}
	base := agentAPIURL(cfg)
	if base == "" {
		if ic.DownloadSource == agentdeploy.ImageDownloadLocal {
			return o, nil, &ConfigValueError{Source: "configuration", Section: "agent", Name: "image_download_source", Value: ic.DownloadSource,
				Expected: "http, unless agents can reach this conductor: set [api]public_endpoint or a specific [api]host_ip and port"}
		}
		log.Info("image cache disabled: agents cannot reach this conductor ([api]public_endpoint unset); image_download_source local is refused")
		return o, nil, nil
	}
	dir := ic.Dir
	if dir == "" {
		dir = filepath.Join(cfg.StatePath, "master_images")
	}
	cache, err := imagecache.New(imagecache.Options{
		Dir: dir, MaxBytes: int64(ic.SizeMiB) << 20, TTL: ic.TTL, Concurrency: ic.Concurrency, OCI: resolver,
		ConvertMemory: int64(ic.ConvertMemoryMiB) << 20, ConvertAttempts: ic.ConvertAttempts,
		PermittedFormats: ic.PermittedFormats, AllowMD5: ic.AllowMD5,
		URLBase: base + imagesPath, Logger: log.With("component", "imagecache"),
	})
	if err != nil {
		return o, nil, fmt.Errorf("anvild: image cache: %w", err)
	}
	if ic.ForceRaw {
		if err := cache.Available(); err != nil {
			log.Warn("force_raw_images is on but qcow2 images cannot be converted here", "error", err)
		}
	}
	cctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() { // ends when anvild closes
		defer close(done)
		cache.Run(cctx, ic.CleanUpInterval)
	}()
	d.onClose(func() error { cancel(); <-done; return cache.Close() })
	o.Images = cache
	log.Info("image cache", "dir", dir, "size_mib", ic.SizeMiB, "url", base+imagesPath, "download_source", ic.DownloadSource)
	return o, cache.Handler(), nil
}
