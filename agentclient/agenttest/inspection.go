package agenttest

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/anvilmetal/anvil/agentclient"
)

// ipaInspectionMaxVersion is the version IPA caps its inspection post at:
// the one with node_uuid and the lookup-style answer.
var ipaInspectionMaxVersion = agentclient.APIVersion{Major: 1, Minor: 84}

// Errors an inspection post ends with. Run logs them and carries on to the
// lookup, as IPA does.
var (
	// ErrInspectionRefused means the API answered a 4xx other than 409
	// (Ironic's 404: the node is not waiting for inspection data, or the
	// API does not serve continue_inspection).
	ErrInspectionRefused = errors.New("agenttest: inspection data refused")
	// ErrInspectionTimeout means no post was accepted within the lookup
	// timeout.
	ErrInspectionTimeout = errors.New("agenttest: inspection data not accepted in time")
)

// InspectionConfig makes a Ramdisk post inspection data before its lookup.
type InspectionConfig struct {
	// CallbackURL is the full continue_inspection URL (e.g. https://api/v1/continue_inspection); empty means APIURL + "/v1/continue_inspection".
	CallbackURL string
	// Inventory is what the ramdisk reports; nil means DefaultInventory(MACs).
	Inventory *agentclient.Inventory
	// PluginData is posted beside the inventory (e.g. "boot_interface": MAC, or "error": "..." to simulate a ramdisk failure).
	PluginData map[string]any
}

// DefaultInventory returns a plausible x86_64 inventory: the given MACs as interfaces (the first with an IPv4 address, has_carrier true), 8 CPUs, 16 GiB memory (total and physical_mb), two disks (a 480 GB SSD sda and a 2 TB HDD sdb), system vendor, boot mode uefi, bmc_address.
//
// Addresses that differ per machine (the IPv4 address, the BMC address
// 10.x.y.z and the serial numbers) are derived from the first MAC, so
// simulated machines do not share them; with no MACs they are fixed.
// Invalid MACs are reported as given.
func DefaultInventory(macs []string) agentclient.Inventory {
	var id [3]byte // the first MAC's last three octets
	if len(macs) > 0 {
		if mac, ok := agentclient.ParseMAC(macs[0]); ok {
			_, _ = hex.Decode(id[:], []byte(strings.ReplaceAll(mac[9:], ":", "")))
		}
	}
	serial := fmt.Sprintf("%02X%02X%02X", id[0], id[1], id[2])
	inv := agentclient.Inventory{
		CPU: agentclient.InventoryCPU{
			ModelName:    "Intel(R) Xeon(R) Silver 4208 CPU @ 2.10GHz",
			Frequency:    "2100.0000",
			Count:        8,
			Architecture: "x86_64",
			Flags:        []string{"fpu", "vme", "pae", "lm", "vmx", "sse4_2", "aes", "avx2"},
			SocketCount:  1,
		},
		Memory: agentclient.InventoryMemory{Total: 16 << 30, PhysicalMB: 16 << 10},
		Disks: []agentclient.InventoryDisk{
			{
				Name: "/dev/sda", Model: "SAMSUNG MZ7LH480", Size: 480103981056, Rotational: false,
				WWN: "0x5002538e000" + strings.ToLower(serial), Serial: "S45PNA0M" + serial, Vendor: "ATA",
				HCTL: "0:0:0:0", ByPath: "/dev/disk/by-path/pci-0000:00:17.0-ata-1",
			},
			{
				Name: "/dev/sdb", Model: "ST2000NM0055", Size: 2000398934016, Rotational: true,
				WWN: "0x5000c500a" + strings.ToLower(serial), Serial: "ZC2" + serial, Vendor: "ATA",
				HCTL: "1:0:0:0", ByPath: "/dev/disk/by-path/pci-0000:00:17.0-ata-2",
			},
		},
		BMCAddress: fmt.Sprintf("10.%d.%d.%d", id[0], id[1], max(id[2], 1)),
		SystemVendor: &agentclient.SystemVendor{
			ProductName: "PowerEdge R640", SerialNumber: "ANV" + serial, Manufacturer: "Dell Inc.",
		},
		Boot:     &agentclient.BootInfo{CurrentBootMode: "uefi"},
		Hostname: "localhost.localdomain",
	}
	for i, m := range macs {
		mac := m
		if norm, ok := agentclient.ParseMAC(m); ok {
			mac = norm
		}
		iface := agentclient.InventoryInterface{
			Name: fmt.Sprintf("eno%d", i+1), MACAddress: mac,
			Vendor: "0x8086", Product: "0x1572", SpeedMbps: 10000,
		}
		if i == 0 {
			iface.IPv4Address = fmt.Sprintf("172.%d.%d.%d", 16+id[0]%16, id[1], max(id[2], 1))
			iface.HasCarrier = true
			inv.Boot.PXEInterface = mac
		}
		inv.Interfaces = append(inv.Interfaces, iface)
	}
	return inv
}

// prepareInspection checks the inspection settings and encodes the data
// posted: the inventory and the plugin data, with boot_interface the first
// MAC unless given.
func prepareInspection(cfg RamdiskConfig) (string, []byte, error) {
	ic := cfg.Inspection
	u := ic.CallbackURL
	if u == "" {
		u = strings.TrimRight(cfg.APIURL, "/") + "/v1/continue_inspection"
	} else if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return "", nil, fmt.Errorf("agenttest: NewRamdisk: Inspection.CallbackURL %q is not an absolute http(s) URL", u)
	}
	var inv agentclient.Inventory
	if ic.Inventory != nil {
		inv = *ic.Inventory
	} else {
		if len(cfg.MACs) == 0 {
			return "", nil, fmt.Errorf("agenttest: NewRamdisk: Inspection needs MACs for the default inventory, or an Inventory")
		}
		inv = DefaultInventory(cfg.MACs)
	}
	body := make(map[string]any, len(ic.PluginData)+2)
	for k, v := range ic.PluginData {
		if k == "inventory" {
			return "", nil, fmt.Errorf("agenttest: NewRamdisk: Inspection.PluginData may not hold an inventory key; set Inspection.Inventory")
		}
		body[k] = v
	}
	if _, ok := body["boot_interface"]; !ok {
		switch {
		case len(cfg.MACs) > 0:
			body["boot_interface"] = cfg.MACs[0]
		case len(inv.Interfaces) > 0:
			body["boot_interface"] = inv.Interfaces[0].MACAddress
		}
	}
	body["inventory"] = inv
	enc, err := json.Marshal(body)
	if err != nil {
		return "", nil, fmt.Errorf("agenttest: NewRamdisk: encoding the inspection data: %w", err)
	}
	return u, enc, nil
}

// Inspect posts the inspection data as IPA does with
// ipa-inspection-callback-url set. The microversion is the server's
// (discovered like the lookup does) capped at 1.84, or 1.84 when discovery
// fails; node_uuid is sent when the ramdisk knows its node and the version
// is 1.84. A connection error, a 5xx or a 409 is retried with the lookup
// back-off (LookupInterval, LookupMaxInterval, LookupConflictBackoff)
// within LookupTimeout (ErrInspectionTimeout); another 4xx ends it
// (ErrInspectionRefused). When a 1.84 answer carries a token the agent
// adopts it, so its lookup then gets "******" and accepts it. Run calls
// Inspect; call it directly only when Run is not running.
func (r *Ramdisk) Inspect(ctx context.Context) error {
	if r.cfg.Inspection == nil {
		return fmt.Errorf("agenttest: Inspect: the ramdisk has no Inspection configuration")
	}
	b := r.newBackoff()
	for {
		status, err := r.inspectOnce(ctx)
		switch {
		case err == nil && status/100 == 2:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case err == nil && status/100 == 4 && status != http.StatusConflict:
			return fmt.Errorf("%w: HTTP %d: %s", ErrInspectionRefused, status, r.Stats().LastInspectionError)
		}
		wait, more := b.next(status)
		if !more {
			return fmt.Errorf("%w after %s (last status %d)", ErrInspectionTimeout, b.timeout, status)
		}
		if err := r.sleep(ctx, wait); err != nil {
			return err
		}
	}
}

// inspectOnce sends one inspection post and records it in the stats.
func (r *Ramdisk) inspectOnce(ctx context.Context) (int, error) {
	ver := ipaInspectionMaxVersion
	if v, ok := r.discover(ctx); ok {
		ver = minVersion(v, ipaInspectionMaxVersion)
	}
	u := r.inspectURL
	if node := strings.ToLower(r.cfg.NodeUUID); node != "" && ver.AtLeast(ipaInspectionMaxVersion) {
		p, err := url.Parse(u)
		if err != nil {
			return 0, err
		}
		q := p.Query()
		q.Set("node_uuid", node)
		p.RawQuery = q.Encode()
		u = p.String()
	}
	status, data, err := r.requestURL(ctx, http.MethodPost, u, r.inspectBody, ver)
	r.mu.Lock()
	r.stats.InspectionsPosted++
	r.stats.LastInspectionStatus = status
	r.mu.Unlock()
	if err != nil {
		r.log.Debug("agenttest: inspection post failed", "error", err)
		r.setInspectionError(err.Error())
		return 0, err
	}
	if status/100 != 2 {
		fault := strings.TrimSpace(string(data))
		if e, ok := agentclient.ParseIronicError(data); ok {
			fault = e.Faultstring
		}
		r.log.Debug("agenttest: inspection data refused", "status", status, "fault", fault)
		r.setInspectionError(fault)
		return status, nil
	}
	var ans struct {
		UUID   string                    `json:"uuid"`
		Node   *agentclient.LookupNode   `json:"node"`
		Config *agentclient.LookupConfig `json:"config"`
	}
	if err := json.Unmarshal(data, &ans); err != nil {
		r.log.Debug("agenttest: inspection answer is not JSON", "error", err)
	}
	if ans.Config != nil {
		if tok := ans.Config.AgentToken; tok != agentclient.MaskedToken && len(tok) >= agentclient.MinAcceptedTokenLength {
			r.agent.SetToken(tok)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case ans.Node != nil && ans.Node.UUID != "":
		r.nodeUUID = ans.Node.UUID
	case ans.UUID != "":
		r.nodeUUID = ans.UUID
	}
	r.stats.InspectionsAccepted++
	r.stats.LastInspectionError = ""
	return status, nil
}

func (r *Ramdisk) setInspectionError(msg string) {
	r.mu.Lock()
	r.stats.LastInspectionError = msg
	r.mu.Unlock()
}
