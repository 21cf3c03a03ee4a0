package netboot

import (
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/netboot/stage"
	"github.com/anvilmetal/anvil/netboot/tftp"
	"github.com/prometheus/client_golang/prometheus"
)

func TestCollectors(t *testing.T) {
	f := newFixture(t, nil)
	f.put(t, f.ramdiskConfig("node-1", IPXE, BIOS, "52:54:00:12:34:56"))
	reg := prometheus.NewPedanticRegistry()
	for _, c := range f.srv.Collectors() {
		if err := reg.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	get(t, f.srv.Handler(), http.MethodGet, "/boot/52-54-00-12-34-56/kernel")
	f.srv.OnTransfer(tftp.Transfer{Request: tftp.Request{Filename: "undionly.kpxe"}, Bytes: 1000, Duration: time.Second})
	f.srv.OnTransfer(tftp.Transfer{Request: tftp.Request{Filename: "undionly.kpxe"}, Bytes: 512, Err: errFake})
	f.srv.ObserveBootStage(stage.Record{Stage: stage.DHCPOffer, MAC: "52:54:00:12:34:56", Addr: "192.0.2.23"})

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName() + "{" + m.GetLabel()[0].GetValue() + "}"
			switch {
			case m.GetCounter() != nil:
				got[key] = m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				got[key] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	want := map[string]float64{
		"anvil_netboot_stages_total{boot prepared}":            1,
		"anvil_netboot_stages_total{dhcp offer}":               1,
		"anvil_netboot_stages_total{kernel}":                   1,
		"anvil_netboot_stages_total{tftp sent}":                1,
		"anvil_netboot_stages_total{tftp failed}":              1,
		"anvil_netboot_stage_failures_total{tftp failed}":      1,
		"anvil_netboot_sent_bytes_total{kernel}":               10000,
		"anvil_netboot_sent_bytes_total{tftp sent}":            1000,
		"anvil_netboot_sent_bytes_total{tftp failed}":          512,
		"anvil_netboot_transfer_duration_seconds{kernel}":      1,
		"anvil_netboot_transfer_duration_seconds{tftp sent}":   1,
		"anvil_netboot_transfer_duration_seconds{tftp failed}": 1,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("metrics:\n got %v\nwant %v", got, want)
	}
}

type fakeErr string

func (e fakeErr) Error() string { return string(e) }

const errFake = fakeErr("timeout waiting for ACK")
