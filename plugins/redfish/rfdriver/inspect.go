package rfdriver

import (
	"fmt"
	"slices"
	"strings"
)

const gib = 1 << 30

// NIC is a network interface found by inspection.
type NIC struct {
	ID      string `json:"id"`
	MAC     string `json:"mac_address"`
	Enabled bool   `json:"enabled"`
	Speed   int    `json:"speed_mbps,omitempty"`
}

// Disk is a drive or volume found by inspection.
type Disk struct {
	Name      string `json:"name"`
	SizeBytes int64  `json:"size"`
	Kind      string `json:"kind"` // drive, volume or simple
}

// Inventory is what out-of-band inspection learned. Fields a BMC did not
// report (or reported malformed) stay zero and are named in Warnings.
type Inventory struct {
	CPUs      int      `json:"cpus,omitempty"`
	CPUArch   string   `json:"cpu_arch,omitempty"`
	CPUModel  string   `json:"cpu_model,omitempty"`
	MemoryMiB int      `json:"memory_mb,omitempty"`
	BootMode  string   `json:"boot_mode,omitempty"` // uefi or bios
	Disks     []Disk   `json:"disks,omitempty"`
	NICs      []NIC    `json:"interfaces,omitempty"`
	Vendor    string   `json:"manufacturer,omitempty"`
	Model     string   `json:"model,omitempty"`
	Serial    string   `json:"serial_number,omitempty"`
	Warnings  []string `json:"warnings,omitempty"`
}

// LocalGB is the size Ironic records as local_gb: the smallest disk of at
// least 4 GiB (volumes preferred over bare drives), in GiB, minus one.
func (inv Inventory) LocalGB() int {
	pick := func(kinds ...string) int64 {
		var best int64
		for _, d := range inv.Disks {
			if slices.Contains(kinds, d.Kind) && d.SizeBytes >= 4*gib && (best == 0 || d.SizeBytes < best) {
				best = d.SizeBytes
			}
		}
		return best
	}
	simple := pick("simple")
	storage := pick("volume")
	if storage == 0 {
		storage = pick("drive")
	}
	size := max(simple, storage)
	if simple != 0 && storage != 0 {
		size = min(simple, storage)
	}
	return max(0, int(size/gib)-1)
}

// IPAInventory is inv in the inventory format of IPA (and of Ironic's
// Redfish inspection): memory.physical_mb, cpu (count, architecture,
// model_name), disks (name, size), interfaces (name, the NIC's Redfish
// Id, and mac_address), system_vendor (manufacturer, product_name,
// serial_number) and boot.current_boot_mode. Fields the BMC did not
// report are left out, as Ironic leaves them out.
func (inv Inventory) IPAInventory() map[string]any {
	out := map[string]any{
		"cpu":    map[string]any{"count": inv.CPUs, "architecture": inv.CPUArch},
		"memory": map[string]any{"physical_mb": inv.MemoryMiB},
	}
	if inv.CPUModel != "" {
		out["cpu"].(map[string]any)["model_name"] = inv.CPUModel
	}
	if len(inv.Disks) > 0 {
		disks := make([]any, 0, len(inv.Disks))
		for _, d := range inv.Disks {
			disks = append(disks, map[string]any{"name": d.Name, "size": d.SizeBytes})
		}
		out["disks"] = disks
	}
	ifaces := make([]any, 0, len(inv.NICs))
	for _, n := range inv.NICs {
		if n.MAC == "" {
			continue
		}
		ifaces = append(ifaces, map[string]any{"name": n.ID, "mac_address": strings.ToLower(n.MAC)})
	}
	out["interfaces"] = ifaces
	vendor := map[string]any{}
	for k, v := range map[string]string{"manufacturer": inv.Vendor, "product_name": inv.Model, "serial_number": inv.Serial} {
		if v != "" {
			vendor[k] = v
		}
	}
	if len(vendor) > 0 {
		out["system_vendor"] = vendor
	}
	if inv.BootMode != "" {
		out["boot"] = map[string]any{"current_boot_mode": inv.BootMode}
	}
	return out
}

var cpuArch = map[string]string{
	"x86": "x86_64", "x86-64": "x86_64", "IA-64": "ia64", "ARM": "arm", "ARM-A64": "aarch64",
	"ARM-A32": "arm", "MIPS": "mips", "MIPS64": "mips64", "PowerISA": "ppc64le", "RV64": "riscv64", "OEM": "oem",
}

// Inspect reads the system's inventory. Each part is read on its own: a
// missing or malformed sub-resource adds a warning, and only a failure to
// read the ComputerSystem itself is an error.
func (s *System) Inspect() (Inventory, error) {
	m, err := s.Raw()
	if err != nil {
		return Inventory{}, err
	}
	var inv Inventory
	warn := func(format string, a ...any) { inv.Warnings = append(inv.Warnings, fmt.Sprintf(format, a...)) }
	inv.Vendor, inv.Model, inv.Serial = getString(m, "Manufacturer"), getString(m, "Model"), getString(m, "SerialNumber")

	if gb, ok := getNumber(getMap(m, "MemorySummary"), "TotalSystemMemoryGiB"); ok && gb > 0 {
		inv.MemoryMiB = int(gb * 1024)
	} else {
		warn("MemorySummary.TotalSystemMemoryGiB missing or malformed")
	}
	switch getString(getMap(m, "Boot"), "BootSourceOverrideMode") {
	case "UEFI":
		inv.BootMode = "uefi"
	case "Legacy":
		inv.BootMode = "bios"
	}

	s.inspectProcessors(m, &inv, warn)
	s.inspectStorage(m, &inv, warn)
	s.inspectNICs(m, &inv, warn)
	return inv, nil
}

func (s *System) inspectProcessors(m map[string]any, inv *Inventory, warn func(string, ...any)) {
	uri := link(m, "Processors")
	if uri == "" {
		warn("no Processors collection")
		return
	}
	coll, err := getJSON(s.cl, uri)
	if err != nil {
		warn("processors: %v", err)
		return
	}
	arches := map[string]int{}
	for _, p := range links(coll, "Members") {
		pm, err := getJSON(s.cl, p)
		if err != nil {
			warn("processor %s: %v", p, err)
			continue
		}
		if getString(pm, "ProcessorType") != "CPU" && getString(pm, "ProcessorType") != "" {
			continue
		}
		if !enabled(pm) {
			continue
		}
		if n, ok := getNumber(pm, "TotalThreads"); ok && n > 0 {
			inv.CPUs += int(n)
		} else if n, ok := getNumber(pm, "TotalCores"); ok && n > 0 {
			inv.CPUs += int(n)
		} else {
			warn("processor %s: no TotalThreads or TotalCores", p)
		}
		if a := getString(pm, "ProcessorArchitecture"); a != "" {
			arches[a]++
		}
		if inv.CPUModel == "" {
			inv.CPUModel = getString(pm, "Model")
		}
	}
	if inv.CPUs == 0 {
		if n, ok := getNumber(getMap(m, "ProcessorSummary"), "LogicalProcessorCount"); ok {
			inv.CPUs = int(n)
		}
	}
	for a := range arches {
		if mapped, ok := cpuArch[a]; ok {
			inv.CPUArch = mapped
		} else {
			warn("unknown processor architecture %q", a)
		}
	}
}

func (s *System) inspectStorage(m map[string]any, inv *Inventory, warn func(string, ...any)) {
	if uri := link(m, "Storage"); uri != "" {
		coll, err := getJSON(s.cl, uri)
		if err != nil {
			warn("storage: %v", err)
		}
		for _, st := range links(coll, "Members") {
			sm, err := getJSON(s.cl, st)
			if err != nil {
				warn("storage %s: %v", st, err)
				continue
			}
			for _, d := range links(sm, "Drives") {
				dm, err := getJSON(s.cl, d)
				if err != nil {
					warn("drive %s: %v", d, err)
					continue
				}
				if size, ok := getNumber(dm, "CapacityBytes"); ok && enabled(dm) {
					inv.Disks = append(inv.Disks, Disk{Name: d, SizeBytes: int64(size), Kind: "drive"})
				} else if enabled(dm) {
					warn("drive %s: CapacityBytes missing or malformed", d)
				}
			}
			if vuri := link(sm, "Volumes"); vuri != "" {
				vc, err := getJSON(s.cl, vuri)
				if err != nil {
					warn("volumes %s: %v", vuri, err)
					continue
				}
				for _, v := range links(vc, "Members") {
					vm, err := getJSON(s.cl, v)
					if err != nil {
						warn("volume %s: %v", v, err)
						continue
					}
					if size, ok := getNumber(vm, "CapacityBytes"); ok {
						inv.Disks = append(inv.Disks, Disk{Name: v, SizeBytes: int64(size), Kind: "volume"})
					} else {
						warn("volume %s: CapacityBytes missing or malformed", v)
					}
				}
			}
		}
	}
	if uri := link(m, "SimpleStorage"); uri != "" {
		coll, err := getJSON(s.cl, uri)
		if err != nil {
			warn("simple storage: %v", err)
			return
		}
		for _, ss := range links(coll, "Members") {
			sm, err := getJSON(s.cl, ss)
			if err != nil {
				warn("simple storage %s: %v", ss, err)
				continue
			}
			devs, _ := sm["Devices"].([]any)
			for i, d := range devs {
				dm, _ := d.(map[string]any)
				if size, ok := getNumber(dm, "CapacityBytes"); ok && enabled(dm) {
					inv.Disks = append(inv.Disks, Disk{Name: fmt.Sprintf("%s#/Devices/%d", ss, i), SizeBytes: int64(size), Kind: "simple"})
				}
			}
		}
	}
}

func (s *System) inspectNICs(m map[string]any, inv *Inventory, warn func(string, ...any)) {
	uri := link(m, "EthernetInterfaces")
	if uri == "" {
		warn("no EthernetInterfaces collection")
		return
	}
	coll, err := getJSON(s.cl, uri)
	if err != nil {
		warn("ethernet interfaces: %v", err)
		return
	}
	for _, n := range links(coll, "Members") {
		nm, err := getJSON(s.cl, n)
		if err != nil {
			warn("interface %s: %v", n, err)
			continue
		}
		mac := getString(nm, "PermanentMACAddress")
		if mac == "" {
			mac = getString(nm, "MACAddress")
		}
		if mac == "" {
			warn("interface %s: no MAC address", n)
			continue
		}
		speed, _ := getNumber(nm, "SpeedMbps")
		inv.NICs = append(inv.NICs, NIC{
			ID: getString(nm, "Id"), MAC: strings.ToLower(mac), Enabled: getString(getMap(nm, "Status"), "State") == "Enabled",
			Speed: int(speed),
		})
	}
}
