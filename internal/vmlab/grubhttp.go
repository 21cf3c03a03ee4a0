package vmlab

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/anvilmetal/anvil/netboot/grubimage"
)

// BuildHTTPGRUB returns the GRUB a UEFI lab's boot server serves to UEFI
// HTTP boot (netboot.Options.HTTPGRUB) for the boot server at httpBase,
// built with netboot/grubimage from Debian's grub-efi-amd64-bin, or taken
// from the cache (keyed by the base, the embedded configuration, the
// modules and the GRUB package's version). Without grub-mkimage or the
// modules the error wraps ErrUnavailable.
func BuildHTTPGRUB(ctx context.Context, c Cache, httpBase string) (string, error) {
	cfg, err := grubimage.EmbeddedConfig(httpBase)
	if err != nil {
		return "", err
	}
	version, err := exec.CommandContext(ctx, "dpkg-query", "-W", "-f=${Version}", "grub-efi-amd64-bin").Output()
	if err != nil {
		return "", fmt.Errorf("%w: grub-efi-amd64-bin is not installed: %v", ErrUnavailable, err)
	}
	in := Inputs{"kind": "grub-http", "base": httpBase, "config": string(cfg),
		"modules": strings.Join(grubimage.Modules, " "), "grub": string(version)}
	dir, _, err := c.Get(in, func(dir string) error {
		return grubimage.Build(ctx, grubimage.Options{HTTPBase: httpBase, Out: filepath.Join(dir, "grubhttpx64.efi")})
	})
	if errors.Is(err, grubimage.ErrNoTool) {
		return "", fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "grubhttpx64.efi"), nil
}
