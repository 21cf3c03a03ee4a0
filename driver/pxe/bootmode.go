package pxe

import (
	"strings"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/netboot"
)

// BootMode returns the node's boot mode and where it was read, as
// Ironic's boot_mode_utils.get_boot_mode decides it: uefi when secure
// boot is requested (capability secure_boot "true" in instance_info or
// properties), else instance_info.deploy_boot_mode, else the boot_mode
// capability (instance_info.capabilities, then properties.capabilities;
// a map or the "k1:v1,k2:v2" string form), else
// driver_internal_info.deploy_boot_mode, else def. Values are compared
// case-insensitively. An unknown value gives an
// *driver.InvalidParameterError naming the field it came from.
func BootMode(t *driver.Task, impl string, def netboot.Mode) (mode netboot.Mode, source string, err error) {
	if capability(t.InstanceInfo["capabilities"], "secure_boot") == "true" ||
		capability(t.Properties["capabilities"], "secure_boot") == "true" {
		return netboot.UEFI, "secure_boot", nil
	}
	type src struct {
		field, key, value string
	}
	var sources []src
	if s, ok := t.InstanceString("deploy_boot_mode"); ok {
		sources = append(sources, src{"instance_info", "deploy_boot_mode", s})
	}
	if s := capability(t.InstanceInfo["capabilities"], "boot_mode"); s != "" {
		sources = append(sources, src{"instance_info", "capabilities", s})
	}
	if s := capability(t.Properties["capabilities"], "boot_mode"); s != "" {
		sources = append(sources, src{"properties", "capabilities", s})
	}
	if s, ok := t.InternalString("deploy_boot_mode"); ok {
		sources = append(sources, src{"driver_internal_info", "deploy_boot_mode", s})
	}
	if len(sources) == 0 {
		return def, "default", nil
	}
	s := sources[0]
	switch m := netboot.Mode(strings.ToLower(strings.TrimSpace(s.value))); m {
	case netboot.BIOS, netboot.UEFI:
		return m, s.field + "." + s.key, nil
	}
	return "", "", &driver.InvalidParameterError{Node: t.NodeUUID, Kind: driver.KindBoot, Impl: impl, Field: s.field, Key: s.key,
		Expected: `boot mode "bios" or "uefi"`}
}

// capability reads one key of Ironic's capabilities: a map, or the
// "k1:v1,k2:v2" string form; "" when absent. The value is lower-cased.
func capability(raw any, key string) string {
	var v string
	switch c := raw.(type) {
	case map[string]any:
		if s, ok := c[key].(string); ok {
			v = s
		}
	case string:
		for _, kv := range strings.Split(c, ",") {
			if k, val, ok := strings.Cut(kv, ":"); ok && strings.TrimSpace(k) == key {
				v = val
				break
			}
		}
	}
	return strings.ToLower(strings.TrimSpace(v))
}

// secureBootField is where secure boot is requested (capability
// secure_boot "true"), "instance_info" before "properties", as Ironic's
// is_secure_boot_requested reads it; "" when it is not.
func secureBootField(t *driver.Task) string {
	switch {
	case capability(t.InstanceInfo["capabilities"], "secure_boot") == "true":
		return "instance_info"
	case capability(t.Properties["capabilities"], "secure_boot") == "true":
		return "properties"
	}
	return ""
}

// mode resolves the node's boot mode and checks that b can boot in it:
// UEFI for UEFI HTTP boot, and no secure boot through an unsigned loader:
// iPXE (Debian's ipxe package ships snponly.efi and ipxe.efi unsigned)
// and the http interface's GRUB (built by netboot/grubimage); the
// firmware's secure boot refuses to start them.
func (b *Boot) mode(t *driver.Task) (netboot.Mode, error) {
	m, source, err := BootMode(t, b.name, b.x.opts.DefaultBootMode)
	if err != nil {
		return "", err
	}
	if f := secureBootField(t); f != "" {
		switch b.iface {
		case netboot.IPXE, netboot.HTTPIPXE:
			return "", b.invalid(t, f, "capabilities", "no secure_boot:true with "+b.name+
				": its UEFI loader, iPXE (snponly.efi or ipxe.efi), is unsigned and secure boot firmware refuses it;"+
				" boot secure boot nodes with a boot interface whose chain is signed")
		case netboot.HTTP:
			return "", b.invalid(t, f, "capabilities", "no secure_boot:true with "+b.name+
				": UEFI HTTP boot loads the GRUB built with an embedded configuration (netboot/grubimage, grubhttpx64.efi),"+
				" which is unsigned (Debian's signed GRUB 2.06 takes no network from UEFI HTTP boot)")
		}
	}
	if b.needsUEFI() && m != netboot.UEFI {
		field, key := "options", "default_boot_mode"
		if f, k, ok := strings.Cut(source, "."); ok {
			field, key = f, k
		}
		return "", b.invalid(t, field, key, `boot mode "uefi": UEFI HTTP boot needs UEFI firmware`)
	}
	return m, nil
}
