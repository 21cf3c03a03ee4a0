package agentclient

import (
	"strings"

	"github.com/anvilmetal/anvil/internal/macaddr"
)

// InterfacesPluginData is what Ironic's validate-interfaces inspection
// hook records in plugin data for inv: all_interfaces, every interface
// with a name and a valid MAC address (keyed by name: the inventory's
// fields plus pxe_enabled), valid_interfaces, the same set (Anvil keeps
// every interface with a valid MAC; it never drops one without an IP
// address), and macs, their MAC addresses. pxeMAC is the MAC the node
// booted from (plugin data boot_interface or the inventory's
// boot.pxe_interface); when it is unknown every interface is marked
// pxe_enabled, as the ports created for them are. Metal3's
// baremetal-operator reads each NIC's PXE flag from all_interfaces.
func InterfacesPluginData(inv *Inventory, pxeMAC string) map[string]any {
	all := map[string]any{}
	var macs []any
	pxeMAC = NormalizeMAC(pxeMAC)
	for _, i := range inv.Interfaces {
		mac := NormalizeMAC(i.MACAddress)
		if i.Name == "" || mac == "" {
			continue
		}
		if _, dup := all[i.Name]; dup {
			continue
		}
		entry := map[string]any{
			"name": i.Name, "mac_address": mac, "has_carrier": i.HasCarrier,
			"pxe_enabled": pxeMAC == "" || mac == pxeMAC,
		}
		for k, v := range map[string]string{"ipv4_address": i.IPv4Address, "ipv6_address": i.IPv6Address,
			"vendor": i.Vendor, "product": i.Product, "biosdevname": i.BIOSDevName} {
			if v != "" {
				entry[k] = v
			}
		}
		if i.SpeedMbps > 0 {
			entry["speed_mbps"] = i.SpeedMbps
		}
		all[i.Name] = entry
		macs = append(macs, mac)
	}
	valid := make(map[string]any, len(all))
	for k, v := range all {
		valid[k] = v
	}
	if macs == nil {
		macs = []any{}
	}
	return map[string]any{"all_interfaces": all, "valid_interfaces": valid, "macs": macs}
}

// PXEMAC is the MAC address the inventory (or the ramdisk's plugin data
// boot_interface) says the node booted from, normalized; "" when neither
// names one.
func PXEMAC(inv *Inventory, pluginData map[string]any) string {
	if v, ok := pluginData["boot_interface"].(string); ok {
		if m := NormalizeMAC(v); m != "" {
			return m
		}
	}
	if inv.Boot != nil {
		if m := NormalizeMAC(inv.Boot.PXEInterface); m != "" {
			return m
		}
		for _, i := range inv.Interfaces {
			if i.Name != "" && i.Name == inv.Boot.PXEInterface {
				return NormalizeMAC(i.MACAddress)
			}
		}
	}
	return ""
}

// NormalizeMAC returns mac in lower-case colon form, read by Ironic's
// rule (internal/macaddr) after trimming white space and a PXE BOOTIF
// prefix ("01-aa-bb-cc-dd-ee-ff"); "" for anything else and for the
// zero address, which names no interface.
func NormalizeMAC(mac string) string {
	m := strings.TrimSpace(mac)
	if len(m) == 20 && strings.HasPrefix(m, "01-") {
		m = m[3:]
	}
	if m, ok := macaddr.Parse(m); ok && m != "00:00:00:00:00:00" {
		return m
	}
	return ""
}
