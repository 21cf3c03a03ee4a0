package agentdeploy

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/imagecache"
	"github.com/anvilmetal/anvil/imagecache/oci"
)

// downloadSource is the node's image_download_source as Ironic resolves
// it: instance_info, then driver_info, then the conductor's def; field
// names where it came from ("" for the conductor's).
func downloadSource(t *driver.Task, def string) (any, string) {
	if v, ok := t.InstanceInfo["image_download_source"]; ok && v != nil {
		return v, "instance_info"
	}
	if v, ok := t.DriverInfo["image_download_source"]; ok && v != nil {
		return v, "driver_info"
	}
	return def, ""
}

func (d *Direct) downloadSource(t *driver.Task) (string, string) {
	v, field := downloadSource(t, d.o.ImageDownloadSource)
	s, _ := v.(string)
	return s, field
}

// imageURL is what the image is downloaded from: image_url when set,
// else image_source.
func imageURL(t *driver.Task) (key, url string, err error) {
	src, _ := t.InstanceString("image_source")
	if v, ok := t.InstanceInfo["image_url"]; ok && v != nil {
		s, isStr := v.(string)
		if !isStr || s == "" {
			return "", "", &driver.InvalidParameterError{Node: t.NodeUUID, Kind: driver.KindDeploy, Impl: Name, Field: "instance_info", Key: "image_url", Expected: "a non-empty http(s) URL string"}
		}
		return "image_url", s, nil
	}
	return "image_source", src, nil
}

// pullSecret is image_pull_secret from instance_info, else driver_info
// (administratively set), as Ironic reads it.
func pullSecret(t *driver.Task) string {
	if s, ok := t.InstanceString("image_pull_secret"); ok && s != "" {
		return s
	}
	s, _ := t.DriverInfoString("image_pull_secret")
	return s
}

// validateImage checks what a deploy will need of the image without
// fetching anything: the download source this conductor serves, and an
// image_info IPA accepts.
func (d *Direct) validateImage(t *driver.Task) error {
	src, field := d.downloadSource(t)
	invalid := func(key, expected string) error {
		if field == "" {
			field = "conductor [agent]"
		}
		return &driver.InvalidParameterError{Node: t.NodeUUID, Kind: driver.KindDeploy, Impl: Name, Field: field, Key: key, Expected: expected}
	}
	if _, ok := t.InstanceString("image_source"); !ok {
		return &driver.MissingParameterError{Node: t.NodeUUID, Kind: driver.KindDeploy, Impl: Name, Field: "instance_info", Missing: []string{"image_source"}}
	}
	key, url, err := imageURL(t)
	if err != nil {
		return err
	}
	isOCI := oci.IsOCI(url)
	if isOCI {
		if _, err := oci.ParseReference(url); err != nil {
			return &driver.InvalidParameterError{Node: t.NodeUUID, Kind: driver.KindDeploy, Impl: Name, Field: "instance_info", Key: key, Expected: "an oci://registry/repository[:tag|@sha256:digest] reference: " + err.Error()}
		}
	}
	switch src {
	case ImageDownloadHTTP:
		if !isOCI {
			_, err := ImageInfo(t)
			return err
		}
	case ImageDownloadLocal:
		if d.o.Images == nil {
			return invalid("image_download_source", fmt.Sprintf("%q: this conductor has no image cache for %q", ImageDownloadHTTP, ImageDownloadLocal))
		}
		if !isOCI && !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
			return &driver.InvalidParameterError{Node: t.NodeUUID, Kind: driver.KindDeploy, Impl: Name, Field: "instance_info", Key: key, Expected: "an http(s) or oci:// URL the conductor can download, got " + url}
		}
		if !isOCI {
			_, hasSum := t.InstanceString("image_checksum")
			_, hasAlgo := t.InstanceString("image_os_hash_algo")
			if !hasSum && !hasAlgo {
				return &driver.MissingParameterError{Node: t.NodeUUID, Kind: driver.KindDeploy, Impl: Name, Field: "instance_info",
					Missing: []string{"image_checksum (or image_os_hash_algo and image_os_hash_value)"}}
			}
		}
	default:
		return invalid("image_download_source", fmt.Sprintf("%q or %q (Anvil has no Swift), got %q", ImageDownloadHTTP, ImageDownloadLocal, src))
	}
	// The rest of image_info (partition fields, formats) as IPA wants it.
	_, err = imageInfo(t, &resolvedImage{url: "http://validate.invalid/", algo: "sha256", value: strings.Repeat("0", 64)})
	return err
}

// ImageError is a failure to get a node's image: from the conductor's
// image cache, or resolving its OCI reference.
type ImageError struct {
	Node, Source string
	Err          error
}

func (e *ImageError) Error() string {
	return fmt.Sprintf("deploy/direct: node %s: image %s: %v", e.Node, e.Source, e.Err)
}
func (e *ImageError) Unwrap() error { return e.Err }

// resolveImage is the image the agent downloads: from the image cache
// (image_download_source "local"), from the registry for an oci://
// source the agent downloads itself, or nil for a plain http(s) one.
func (d *Direct) resolveImage(ctx context.Context, t *driver.Task) (*resolvedImage, error) {
	if err := d.validateImage(t); err != nil {
		return nil, err
	}
	src, _ := d.downloadSource(t)
	_, url, _ := imageURL(t)
	arch, _ := t.Properties["cpu_arch"].(string)
	switch {
	case src == ImageDownloadLocal:
		req := imagecache.Request{Source: url, PullSecret: pullSecret(t), CPUArch: arch, ForceRaw: d.o.ForceRawImages}
		req.Checksum, _ = t.InstanceString("image_checksum")
		req.HashAlgo, _ = t.InstanceString("image_os_hash_algo")
		req.HashValue, _ = t.InstanceString("image_os_hash_value")
		ni, err := d.o.Images.NodeImage(ctx, t.NodeUUID, req)
		if err != nil {
			return nil, &ImageError{Node: t.NodeUUID, Source: url, Err: err}
		}
		return &resolvedImage{url: ni.URL, algo: ni.HashAlgo, value: ni.HashValue, diskFormat: ni.DiskFormat}, nil
	case oci.IsOCI(url):
		a, err := d.o.OCI.Resolve(ctx, oci.Request{Ref: url, CPUArch: arch, DownloadSource: src, PullSecret: pullSecret(t)})
		if err != nil {
			return nil, &ImageError{Node: t.NodeUUID, Source: url, Err: err}
		}
		// IPA 2023.1 sends no credentials and decompresses nothing: such
		// an image must come through the conductor.
		if a.Authenticated {
			return nil, &ImageError{Node: t.NodeUUID, Source: url, Err: errors.New("the registry requires a token the agent cannot get: set image_download_source to \"local\"")}
		}
		if a.Compression != "" {
			return nil, &ImageError{Node: t.NodeUUID, Source: url, Err: fmt.Errorf("the blob is %s-compressed, which the agent cannot stream: set image_download_source to \"local\"", a.Compression)}
		}
		algo, value := a.Checksum()
		return &resolvedImage{url: a.BlobURL, algo: algo, value: value, diskFormat: a.DiskFormat}, nil
	}
	return nil, nil
}
