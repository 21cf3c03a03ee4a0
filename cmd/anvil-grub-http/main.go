// Command anvil-grub-http builds the GRUB EFI binary the boot server
// serves to UEFI HTTP boot for the http boot interface (package
// netboot/grubimage), for the boot server at -http-base (anvild's
// [deploy]http_url):
//
//	anvil-grub-http -http-base http://192.0.2.1:8080 -o /var/lib/anvil/grubhttpx64.efi
//
// then name the file in anvild's [anvil]http_grub_efi (or
// netboot.Options.HTTPGRUB). Rebuild it when the base changes. It needs
// Debian's grub-common (grub-mkimage) and grub-efi-amd64-bin.
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

	"github.com/anvilmetal/anvil/netboot/grubimage"
)

func main() {
	err := run(os.Args[1:], os.Stdout)
	switch {
	case errors.Is(err, flag.ErrHelp):
	case err != nil:
		fmt.Fprintln(os.Stderr, "anvil-grub-http:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("anvil-grub-http", flag.ContinueOnError)
	var o grubimage.Options
	fs.StringVar(&o.HTTPBase, "http-base", "", "the boot server's HTTP base, as machines reach it (anvild's [deploy]http_url), e.g. http://192.0.2.1:8080")
	fs.StringVar(&o.Out, "o", "", "the image file to write")
	fs.StringVar(&o.ModulesDir, "modules", grubimage.DefaultModulesDir, "GRUB's x86_64-efi modules directory")
	fs.StringVar(&o.MkImage, "grub-mkimage", "grub-mkimage", "the grub-mkimage program")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := grubimage.Build(ctx, o); err != nil {
		return err
	}
	srv, _ := grubimage.Server(o.HTTPBase)
	fmt.Fprintf(stdout, "%s: GRUB for UEFI HTTP boot from %s (set [anvil]http_grub_efi to it)\n", o.Out, srv)
	return nil
}
