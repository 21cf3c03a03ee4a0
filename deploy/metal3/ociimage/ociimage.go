// Package ociimage writes a container image as an OCI image layout (a
// directory podman, skopeo, crane or containerd import) from a root file
// system directory, without a container daemon: one layer, written
// reproducibly (entries sorted, owner root, times fixed, gzip without a
// name or time), so the same inputs give the same image digest.
package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"
)

// Media types of the OCI image specification.
const (
	MediaManifest = "application/vnd.oci.image.manifest.v1+json"
	MediaConfig   = "application/vnd.oci.image.config.v1+json"
	MediaLayer    = "application/vnd.oci.image.layer.v1.tar+gzip"
)

// Config is what the image runs.
type Config struct {
	Entrypoint   []string
	Cmd          []string
	Env          []string
	ExposedPorts []string // "6385/tcp"
	User         string
	WorkingDir   string
	// Tag is the reference name in index.json
	// (org.opencontainers.image.ref.name), e.g. "latest".
	Tag string
	// Arch is the image's architecture; default runtime.GOARCH.
	Arch string
	// Created is the image's creation time; zero: the Unix epoch, for
	// reproducible builds.
	Created time.Time
}

// Descriptor is an OCI content descriptor.
type Descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Build writes the image of rootfs with cfg into the OCI layout
// directory out (created; it must not hold another layout) and returns
// the manifest's descriptor.
func Build(rootfs, out string, cfg Config) (Descriptor, error) {
	if _, err := os.Stat(filepath.Join(out, "index.json")); err == nil {
		return Descriptor{}, fmt.Errorf("ociimage: %s already holds an image layout", out)
	}
	layer, diffID, err := Layer(rootfs)
	if err != nil {
		return Descriptor{}, err
	}
	if err := os.MkdirAll(filepath.Join(out, "blobs", "sha256"), 0o755); err != nil {
		return Descriptor{}, err
	}
	put := func(media string, b []byte) (Descriptor, error) {
		sum := sha256.Sum256(b)
		d := Descriptor{MediaType: media, Digest: "sha256:" + hex.EncodeToString(sum[:]), Size: int64(len(b))}
		return d, os.WriteFile(filepath.Join(out, "blobs", "sha256", hex.EncodeToString(sum[:])), b, 0o644)
	}
	ld, err := put(MediaLayer, layer)
	if err != nil {
		return Descriptor{}, err
	}
	arch := cfg.Arch
	if arch == "" {
		arch = runtime.GOARCH
	}
	created := cfg.Created
	if created.IsZero() {
		created = time.Unix(0, 0)
	}
	ports := map[string]struct{}{}
	for _, p := range cfg.ExposedPorts {
		ports[p] = struct{}{}
	}
	imgCfg := map[string]any{
		"created": created.UTC().Format(time.RFC3339), "architecture": arch, "os": "linux",
		"config": map[string]any{"Entrypoint": cfg.Entrypoint, "Cmd": cfg.Cmd, "Env": cfg.Env,
			"ExposedPorts": ports, "User": cfg.User, "WorkingDir": cfg.WorkingDir},
		"rootfs":  map[string]any{"type": "layers", "diff_ids": []string{diffID}},
		"history": []map[string]any{{"created": created.UTC().Format(time.RFC3339), "created_by": "anvil ociimage"}},
	}
	cb, err := json.Marshal(imgCfg)
	if err != nil {
		return Descriptor{}, err
	}
	cd, err := put(MediaConfig, cb)
	if err != nil {
		return Descriptor{}, err
	}
	mb, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": MediaManifest, "config": cd, "layers": []Descriptor{ld}})
	if err != nil {
		return Descriptor{}, err
	}
	md, err := put(MediaManifest, mb)
	if err != nil {
		return Descriptor{}, err
	}
	if cfg.Tag != "" {
		md.Annotations = map[string]string{"org.opencontainers.image.ref.name": cfg.Tag}
	}
	ib, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json", "manifests": []Descriptor{md}})
	if err != nil {
		return Descriptor{}, err
	}
	if err := os.WriteFile(filepath.Join(out, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644); err != nil {
		return Descriptor{}, err
	}
	return md, os.WriteFile(filepath.Join(out, "index.json"), ib, 0o644)
}

// Layer returns rootfs as a gzip-compressed tar layer and the digest of
// the uncompressed tar (the image config's diff_id). Regular files,
// directories and symbolic links are kept with their permission bits;
// owners are root and times the Unix epoch. Anything else (devices,
// sockets) is an error naming the path.
func Layer(rootfs string) ([]byte, string, error) {
	var paths []string
	err := filepath.WalkDir(rootfs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != rootfs {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return nil, "", fmt.Errorf("ociimage: %w", err)
	}
	sort.Strings(paths)
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	epoch := time.Unix(0, 0)
	for _, p := range paths {
		rel, _ := filepath.Rel(rootfs, p)
		rel = filepath.ToSlash(rel)
		st, err := os.Lstat(p)
		if err != nil {
			return nil, "", fmt.Errorf("ociimage: %w", err)
		}
		h := &tar.Header{Name: rel, Mode: int64(st.Mode().Perm()), ModTime: epoch, Format: tar.FormatPAX}
		switch {
		case st.Mode().IsDir():
			h.Typeflag, h.Name = tar.TypeDir, rel+"/"
		case st.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return nil, "", fmt.Errorf("ociimage: %w", err)
			}
			h.Typeflag, h.Linkname = tar.TypeSymlink, target
		case st.Mode().IsRegular():
			h.Typeflag, h.Size = tar.TypeReg, st.Size()
		default:
			return nil, "", fmt.Errorf("ociimage: %s: not a regular file, directory or symbolic link (%s)", rel, st.Mode().Type())
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, "", err
		}
		if h.Typeflag == tar.TypeReg {
			f, err := os.Open(p)
			if err != nil {
				return nil, "", fmt.Errorf("ociimage: %w", err)
			}
			_, err = io.Copy(tw, f)
			f.Close()
			if err != nil {
				return nil, "", fmt.Errorf("ociimage: %s: %w", rel, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(raw.Bytes())
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.DefaultCompression)
	if err != nil {
		return nil, "", err
	}
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return nil, "", err
	}
	if err := zw.Close(); err != nil {
		return nil, "", err
	}
	return gz.Bytes(), "sha256:" + hex.EncodeToString(sum[:]), nil
}

// Unpack extracts the single layer of the layout's first image into dir
// (for tests and for running the image without a runtime). Entries that
// would land outside dir are refused.
func Unpack(layout, dir string) (Config, error) {
	var idx struct{ Manifests []Descriptor }
	if err := readJSON(filepath.Join(layout, "index.json"), &idx); err != nil {
		return Config{}, err
	}
	if len(idx.Manifests) == 0 {
		return Config{}, fmt.Errorf("ociimage: %s: index.json lists no image", layout)
	}
	var man struct {
		Config Descriptor
		Layers []Descriptor
	}
	if err := readBlob(layout, idx.Manifests[0], &man); err != nil {
		return Config{}, err
	}
	var ic struct {
		Config struct {
			Entrypoint, Cmd, Env []string
			User                 string
		} `json:"config"`
	}
	if err := readBlob(layout, man.Config, &ic); err != nil {
		return Config{}, err
	}
	for _, l := range man.Layers {
		b, err := blob(layout, l)
		if err != nil {
			return Config{}, err
		}
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			return Config{}, err
		}
		tr := tar.NewReader(zr)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return Config{}, err
			}
			target := filepath.Join(dir, filepath.FromSlash(h.Name))
			if !strings.HasPrefix(target, filepath.Clean(dir)+string(filepath.Separator)) {
				return Config{}, fmt.Errorf("ociimage: layer entry %q leaves the directory", h.Name)
			}
			switch h.Typeflag {
			case tar.TypeDir:
				if err := os.MkdirAll(target, fs.FileMode(h.Mode)|0o700); err != nil {
					return Config{}, err
				}
			case tar.TypeSymlink:
				if err := os.Symlink(h.Linkname, target); err != nil {
					return Config{}, err
				}
			case tar.TypeReg:
				f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, fs.FileMode(h.Mode))
				if err != nil {
					return Config{}, err
				}
				_, err = io.Copy(f, io.LimitReader(tr, h.Size))
				f.Close()
				if err != nil {
					return Config{}, err
				}
			}
		}
	}
	return Config{Entrypoint: ic.Config.Entrypoint, Cmd: ic.Config.Cmd, Env: ic.Config.Env, User: ic.Config.User}, nil
}

func blob(layout string, d Descriptor) ([]byte, error) {
	hexd, ok := strings.CutPrefix(d.Digest, "sha256:")
	if !ok {
		return nil, fmt.Errorf("ociimage: digest %q is not sha256", d.Digest)
	}
	b, err := os.ReadFile(filepath.Join(layout, "blobs", "sha256", hexd))
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	if hex.EncodeToString(sum[:]) != hexd || int64(len(b)) != d.Size {
		return nil, fmt.Errorf("ociimage: blob %s does not match its descriptor", d.Digest)
	}
	return b, nil
}

func readBlob(layout string, d Descriptor, v any) error {
	b, err := blob(layout, d)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func readJSON(p string, v any) error {
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
