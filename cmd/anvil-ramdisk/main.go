// Command anvil-ramdisk builds the stock Ironic Python Agent ramdisk
// (package ramdisk): a Debian kernel, an initramfs and, with -iso, a
// bootable ISO, from Debian packages and the agent's source release,
// cached by their inputs.
//
//	anvil-ramdisk [-ipa-tarball FILE] [-ipa-version V] [-package NAME]... [-iso] [-cache DIR] [-out DIR]
//
// Without -ipa-tarball the release is downloaded from PyPI and checked
// against the SHA-256 the index publishes. It prints where each file is,
// its size and how long the build took; with -out it also copies the
// files there (vmlinuz, initramfs, ipa.iso, packages). It needs root
// (debootstrap) and Debian's debootstrap, zstd, kmod, cpio and, for
// -iso, xorriso and isolinux.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/anvilmetal/anvil/ramdisk"
)

// packages is a repeatable -package flag.
type packages []string

func (p *packages) String() string { return strings.Join(*p, ",") }
func (p *packages) Set(v string) error {
	for _, name := range strings.Split(v, ",") {
		if name = strings.TrimSpace(name); name != "" {
			*p = append(*p, name)
		}
	}
	return nil
}

func main() {
	err := run(os.Args[1:], os.Stdout)
	switch {
	case errors.Is(err, flag.ErrHelp):
		// The flag set printed the usage.
	case err != nil:
		fmt.Fprintln(os.Stderr, "anvil-ramdisk:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("anvil-ramdisk", flag.ContinueOnError)
	var (
		o     ramdisk.Options
		extra packages
		cache = fs.String("cache", "", "cache directory (default <user cache dir>/anvil/ramdisk)")
		out   = fs.String("out", "", "also copy the built files into this directory")
	)
	fs.StringVar(&o.IPATarball, "ipa-tarball", "", "ironic-python-agent source release (.tar.gz); default: download -ipa-version from PyPI")
	fs.StringVar(&o.IPAVersion, "ipa-version", ramdisk.DefaultIPAVersion, "ironic-python-agent version (the tarball's, or the one to download)")
	fs.Var(&extra, "package", "extra Debian package for the root file system (repeatable, or comma-separated)")
	fs.BoolVar(&o.ISO, "iso", false, "also build the bootable ISO")
	fs.StringVar(&o.Suite, "suite", ramdisk.DefaultSuite, "Debian suite")
	fs.StringVar(&o.Mirror, "mirror", ramdisk.DefaultMirror, "Debian archive")
	fs.StringVar(&o.PyPIURL, "pypi", ramdisk.DefaultPyPIURL, "package index to download the agent from")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q (flags only)", fs.Args())
	}
	o.Packages = extra
	var err error
	if *cache != "" {
		o.Cache = ramdisk.Cache{Dir: *cache}
	} else if o.Cache, err = ramdisk.DefaultCache(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.IPATarball == "" {
		fmt.Fprintf(stdout, "no -ipa-tarball: downloading %s %s from %s\n", ramdisk.IPAProject, o.IPAVersion, o.PyPIURL)
	}
	began := time.Now()
	img, err := ramdisk.Build(ctx, o)
	if err != nil {
		return err
	}
	how := "initramfs from the cache"
	if img.Built {
		how = "initramfs built"
	}
	fmt.Fprintf(stdout, "%s; done in %.1fs (ironic-python-agent %s from %s)\n", how, time.Since(began).Seconds(), o.IPAVersion, img.IPATarball)
	files := []struct{ name, path string }{
		{"vmlinuz", img.Kernel.Path}, {"initramfs", img.Initramfs}, {"ipa.iso", img.ISO}, {"packages", img.Packages},
	}
	for _, f := range files {
		if f.path == "" {
			continue
		}
		st, err := os.Stat(f.path)
		if err != nil {
			return err
		}
		dst := f.path
		if *out != "" {
			dst = filepath.Join(*out, f.name)
			if err := copyFile(f.path, dst); err != nil {
				return err
			}
		}
		fmt.Fprintf(stdout, "%-9s %7.1f MiB  %s\n", f.name, float64(st.Size())/(1<<20), dst)
	}
	fmt.Fprintf(stdout, "kernel    %s %s\n", img.Kernel.Package, img.Kernel.Version)
	return nil
}

func copyFile(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, in); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, dst)
}
