// Command vmlab-images builds the guest images the QEMU tests boot, or
// finds them in the cache (~/.cache/anvil/vmlab, or $ANVIL_VMLAB_CACHE,
// keyed by their inputs), before the tests run: .ci/run runs it in a
// stage of its own so that no test's timeout includes a first-time image
// build (the IPA ramdisk's debootstrap takes minutes, more under load).
//
// It gets, in order, the Debian kernel, the marker initramfs (the boot
// server tests), the OS image, its UEFI (GPT) form, its secure boot form
// (Debian's signed shim and GRUB), the partition image and the software
// RAID images made of it, and with an IPA source tarball the IPA
// ramdisk and its ISO (the real-machine tests), printing one line for
// each: built now or from the cache, the wall time and the path. An image
// the machine cannot build (not root, a tool or Debian package missing)
// is reported as unavailable and is no failure: the tests that need it
// skip with the same reason. Any other error is, and the exit status is 1.
//
// Usage (as root, from the repository):
//
//	go run ./internal/vmlab/cmd/vmlab-images [-ipa-tarball path] [-timeout 40m]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/anvilmetal/anvil/internal/vmlab"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "vmlab-images:", err)
		os.Exit(1)
	}
}

// image is one image to get: its name, and get returns its path and
// whether it was built now.
type image struct {
	name string
	get  func(ctx context.Context) (path string, built bool, err error)
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("vmlab-images", flag.ContinueOnError)
	fs.SetOutput(out)
	tarball := fs.String("ipa-tarball", os.Getenv(vmlab.IPATarballEnv), "IPA source tarball the IPA ramdisk is built from (default $"+vmlab.IPATarballEnv+"); without it the ramdisk and its ISO are not built")
	timeout := fs.Duration("timeout", 40*time.Minute, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *timeout <= 0 {
		return fmt.Errorf("-timeout must be positive, got %v", *timeout)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	cache, err := vmlab.DefaultCache()
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "cache %s\n", cache.Dir)

	var rd vmlab.IPARamdisk
	haveRamdisk := false
	var osImg vmlab.OSImage
	haveOS := false
	var partImg vmlab.PartitionImage
	havePart := false
	images := []image{
		{"kernel", func(ctx context.Context) (string, bool, error) {
			// The cache does not say whether the kernel was downloaded
			// now; the time does.
			k, err := vmlab.DebianKernel(ctx, cache)
			return k.Path, false, err
		}},
		{"marker-initramfs", func(context.Context) (string, bool, error) {
			p, err := vmlab.MarkerInitramfs(cache, "")
			return p, false, err
		}},
		{"os-image", func(ctx context.Context) (string, bool, error) {
			img, err := vmlab.BuildOSImage(ctx, cache)
			osImg, haveOS = img, err == nil
			return img.Raw, img.Built, err
		}},
		{"os-image-uefi", func(ctx context.Context) (string, bool, error) {
			if !haveOS {
				return "", false, fmt.Errorf("%w: no OS image to make the UEFI image of", vmlab.ErrUnavailable)
			}
			img, err := vmlab.BuildUEFIOSImage(ctx, cache, osImg)
			return img.Raw, img.Built, err
		}},
		{"os-image-uefi-sb", func(ctx context.Context) (string, bool, error) {
			if !haveOS {
				return "", false, fmt.Errorf("%w: no OS image to make the secure boot image of", vmlab.ErrUnavailable)
			}
			img, err := vmlab.BuildSecureBootOSImage(ctx, cache, osImg)
			return img.Raw, img.Built, err
		}},
		{"os-image-part", func(ctx context.Context) (string, bool, error) {
			if !haveOS {
				return "", false, fmt.Errorf("%w: no OS image to take the kernel and initramfs of", vmlab.ErrUnavailable)
			}
			img, err := vmlab.BuildPartitionImage(ctx, cache, osImg)
			partImg, havePart = img, err == nil
			return img.QCOW2, img.Built, err
		}},
		{"os-image-raid", func(ctx context.Context) (string, bool, error) {
			if !havePart {
				return "", false, fmt.Errorf("%w: no partition image to make the software RAID images of", vmlab.ErrUnavailable)
			}
			img, err := vmlab.BuildRAIDOSImage(ctx, cache, partImg)
			return img.BIOS, img.Built, err
		}},
	}
	if *tarball != "" {
		images = append(images,
			image{"ipa-ramdisk", func(ctx context.Context) (string, bool, error) {
				var err error
				rd, err = vmlab.BuildIPARamdisk(ctx, cache, *tarball)
				haveRamdisk = err == nil
				return rd.Initramfs, rd.Built, err
			}},
			image{"ipa-iso", func(ctx context.Context) (string, bool, error) {
				if !haveRamdisk {
					return "", false, fmt.Errorf("%w: no IPA ramdisk to make the ISO of", vmlab.ErrUnavailable)
				}
				iso, err := vmlab.BuildIPAISO(ctx, cache, rd)
				return iso.Path, iso.Built, err
			}})
	} else {
		fmt.Fprintf(out, "%-16s skipped: no IPA tarball (-ipa-tarball or $%s)\n", "ipa-ramdisk", vmlab.IPATarballEnv)
	}
	var failed []string
	for _, im := range images {
		began := time.Now()
		path, built, err := im.get(ctx)
		took := time.Since(began).Seconds()
		switch {
		case errors.Is(err, vmlab.ErrUnavailable):
			fmt.Fprintf(out, "%-16s unavailable after %.1fs (its tests skip): %v\n", im.name, took, err)
		case err != nil:
			fmt.Fprintf(out, "%-16s FAILED after %.1fs: %v\n", im.name, took, err)
			failed = append(failed, im.name)
			if ctx.Err() != nil {
				return fmt.Errorf("%v: %w", failed, ctx.Err())
			}
		default:
			how := "ready"
			if built {
				how = "built"
			}
			fmt.Fprintf(out, "%-16s %s in %.1fs: %s\n", im.name, how, took, path)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("images failed: %v", failed)
	}
	return nil
}
