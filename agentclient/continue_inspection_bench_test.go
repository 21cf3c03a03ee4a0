package agentclient_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/agentclient/agenttest"
)

// bigInventoryBody is a continue_inspection body of a large server as IPA
// reports it: 48 NICs each with a dozen LLDP TLVs, 96 disks, 128 CPU
// flags, and plugin data; about 100 KiB.
func bigInventoryBody(tb testing.TB) []byte {
	tb.Helper()
	ifaces := make([]map[string]any, 48)
	for i := range ifaces {
		lldp := make([][]any, 12)
		for j := range lldp {
			lldp[j] = []any{j + 1, strings.Repeat(fmt.Sprintf("%02x", j), 24)}
		}
		ifaces[i] = map[string]any{
			"name": fmt.Sprintf("ens%df%d", i/4, i%4), "mac_address": fmt.Sprintf("52:54:00:%02x:%02x:%02x", i, i*3%256, i*7%256),
			"ipv4_address": nil, "has_carrier": i%2 == 0, "vendor": "0x15b3", "product": "0x1017",
			"speed_mbps": 25000, "biosdevname": fmt.Sprintf("p%dp%d", i/4, i%4), "client_id": nil, "lldp": lldp,
		}
	}
	ifaces[0]["mac_address"] = nodeMAC
	disks := make([]map[string]any, 96)
	for i := range disks {
		disks[i] = map[string]any{
			"name": fmt.Sprintf("/dev/sd%c%c", 'a'+i/26, 'a'+i%26), "model": "ST16000NM001G", "size": 16000900661248,
			"rotational": true, "wwn": fmt.Sprintf("0x5000c500c%07x", i), "serial": fmt.Sprintf("ZL2%05d", i),
			"vendor": "SEAGATE", "hctl": fmt.Sprintf("%d:0:%d:0", i/16, i%16), "by_path": fmt.Sprintf("/dev/disk/by-path/pci-0000:3b:00.0-sas-exp0x500056b3-phy%d-lun-0", i),
		}
	}
	flags := make([]string, 128)
	for i := range flags {
		flags[i] = fmt.Sprintf("flag%03d", i)
	}
	body, err := json.Marshal(map[string]any{
		"inventory": map[string]any{
			"interfaces": ifaces, "disks": disks,
			"cpu":    map[string]any{"model_name": "AMD EPYC 7763 64-Core Processor", "count": 128, "architecture": "x86_64", "flags": flags, "socket_count": 2},
			"memory": map[string]any{"total": 1 << 40, "physical_mb": 1 << 20}, "bmc_address": "10.9.8.7", "bmc_v6address": "::/0",
			"system_vendor": map[string]any{"product_name": "R7525", "serial_number": "ABC", "manufacturer": "Dell Inc."},
			"boot":          map[string]any{"current_boot_mode": "uefi", "pxe_interface": nodeMAC},
		},
		"boot_interface": "01-" + strings.ReplaceAll(nodeMAC, ":", "-"),
		"root_disk":      map[string]any{"name": "/dev/sda", "size": 16000900661248},
		"logs":           strings.Repeat("H4sIAAAAAAAAA", 1000),
	})
	if err != nil {
		tb.Fatal(err)
	}
	return body
}

// BenchmarkDecodeInspectionRequest measures parsing and checking a large
// inventory.
func BenchmarkDecodeInspectionRequest(b *testing.B) {
	body := bigInventoryBody(b)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := agentclient.DecodeInspectionRequest(body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkContinueInspection measures the whole endpoint (1.84: lookup,
// token, hand-over, lookup-style answer) in process, without the network.
func BenchmarkContinueInspection(b *testing.B) {
	body := bigInventoryBody(b)
	mem := agenttest.NewBackend()
	defer mem.Close()
	if err := mem.AddNode(agentclient.Node{UUID: nodeID, ProvisionState: "inspect wait"}, nodeMAC); err != nil {
		b.Fatal(err)
	}
	// Discard recorded data so memory stays flat.
	h, err := agentclient.NewHandler(discardInspections{mem}, agentclient.HandlerConfig{})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/v1/continue_inspection", strings.NewReader(string(body)))
		req.Header.Set(agentclient.HeaderAPIVersion, "1.84")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusAccepted {
			b.Fatalf("HTTP %d: %s", rec.Code, rec.Body)
		}
	}
}

// discardInspections accepts inspection data without keeping it.
type discardInspections struct{ *agenttest.Backend }

func (discardInspections) ContinueInspection(_ context.Context, _ agentclient.InspectionData) error {
	return nil
}
