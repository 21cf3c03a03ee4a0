package rfplugin

import (
	"testing"

	"github.com/anvilmetal/anvil/plugins/redfish/rfdriver"
)

// TestBootLoadersFromEnvironment: the environment anvild sets replaces
// Debian's loaders one by one; unset ones stay Debian's.
func TestBootLoadersFromEnvironment(t *testing.T) {
	env := map[string]string{"ANVIL_REDFISH_ISOLINUX_BIN": "/opt/isolinux.bin", "ANVIL_REDFISH_GRUB_EFI": "/opt/grub.efi"}
	l := bootLoaders(func(k string) string { return env[k] })
	def := rfdriver.DefaultBootLoaders()
	if l.ISOLINUX != "/opt/isolinux.bin" || l.GRUBEFI != "/opt/grub.efi" || l.LDLinux != def.LDLinux {
		t.Fatalf("loaders %+v (Debian's %+v)", l, def)
	}
	if got := bootLoaders(func(string) string { return "" }); got != def {
		t.Fatalf("no environment: %+v, want Debian's %+v", got, def)
	}
}
