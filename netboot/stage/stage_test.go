package stage_test

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/netboot/stage"
)

func TestCheckNamesTheLastStageReached(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 42, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	mac := "52:54:00:12:34:56"
	prepared := stage.Record{Node: "n1", Stage: stage.Prepared, At: at(0)}
	offer := stage.Record{Node: "n1", MAC: mac, Stage: stage.DHCPOffer, At: at(3), Addr: "192.0.2.23"}
	tftp := stage.Record{Node: "n1", MAC: mac, Stage: stage.TFTPSent, At: at(4), File: "undionly.kpxe"}
	ack := stage.Record{Node: "n1", MAC: mac, Stage: stage.DHCPAck, At: at(6), Addr: "192.0.2.23"}
	script := stage.Record{Node: "n1", MAC: mac, Stage: stage.Script, At: at(7), File: "/boot/52-54-00-12-34-56.ipxe"}
	kernel := stage.Record{Node: "n1", Stage: stage.Kernel, At: at(9), Bytes: 8 << 20, Duration: 2 * time.Second}
	ramdisk := stage.Record{Node: "n1", Stage: stage.Ramdisk, At: at(20), Bytes: 90 << 20, Duration: 11 * time.Second}
	lookup := stage.Record{Node: "n1", Stage: stage.AgentLookup, At: at(90), Addr: "192.0.2.23"}
	beat := stage.Record{Node: "n1", Stage: stage.AgentHeartbeat, At: at(92), Addr: "192.0.2.23"}
	ramdiskAck := stage.Record{Node: "n1", MAC: mac, Stage: stage.DHCPAck, At: at(60), Addr: "192.0.2.23"}
	pxeAgain := stage.Record{Node: "n1", MAC: mac, Stage: stage.DHCPAck, At: at(61), Addr: "192.0.2.23", Arch: "bios"}
	d := stage.Deadlines{DHCP: 600 * time.Second, Fetch: 600 * time.Second, Agent: 600 * time.Second, Heartbeat: 300 * time.Second}

	tests := []struct {
		name    string
		records []stage.Record
		now     time.Time
		stalled bool
		want    string
	}{
		{name: "no attempt", records: []stage.Record{offer}, now: at(5000)},
		{name: "within the DHCP deadline", records: []stage.Record{prepared}, now: at(599)},
		{name: "no DHCP", records: []stage.Record{prepared}, now: at(600), stalled: true,
			want: "boot configuration written at 10:42:00, no DHCP request in 600 s"},
		{name: "no script after iPXE", records: []stage.Record{prepared, offer, tftp}, now: at(700), stalled: true,
			want: "boot configuration written at 10:42:00, DHCP offered 192.0.2.23 at 10:42:03, TFTP undionly.kpxe sent at 10:42:04, no boot script or kernel request in 600 s"},
		{name: "iPXE asked DHCP again", records: []stage.Record{prepared, offer, tftp, ack}, now: at(700), stalled: true,
			want: "boot configuration written at 10:42:00, DHCP offered 192.0.2.23 at 10:42:03, TFTP undionly.kpxe sent at 10:42:04, DHCP acknowledged 192.0.2.23 at 10:42:06, no iPXE script request in 600 s"},
		{name: "no agent", records: []stage.Record{prepared, offer, script, kernel, ramdisk}, now: at(620), stalled: true,
			want: "boot configuration written at 10:42:00, DHCP offered 192.0.2.23 at 10:42:03, boot script /boot/52-54-00-12-34-56.ipxe fetched at 10:42:07, kernel downloaded (8.0 MiB in 2s) at 10:42:09, ramdisk downloaded (90.0 MiB in 11s) at 10:42:20, no agent lookup in 600 s"},
		{name: "no heartbeat", records: []stage.Record{prepared, ramdisk, lookup}, now: at(390), stalled: true,
			want: "boot configuration written at 10:42:00, ramdisk downloaded (90.0 MiB in 11s) at 10:42:20, agent lookup from 192.0.2.23 at 10:43:30, no agent heartbeat in 300 s"},
		{name: "heartbeat ends the checks", records: []stage.Record{prepared, ramdisk, lookup, beat}, now: at(100000)},
		// The booted ramdisk's own DHCP (no PXE client architecture) is
		// not a firmware waiting for a boot file: the agent comes next.
		{name: "the ramdisk's DHCP within the agent deadline", records: []stage.Record{prepared, offer, script, kernel, ramdisk, ramdiskAck}, now: at(60 + 599)},
		{name: "no agent after the ramdisk's DHCP", records: []stage.Record{prepared, script, kernel, ramdisk, ramdiskAck}, now: at(60 + 600), stalled: true,
			want: "boot configuration written at 10:42:00, boot script /boot/52-54-00-12-34-56.ipxe fetched at 10:42:07, kernel downloaded (8.0 MiB in 2s) at 10:42:09, ramdisk downloaded (90.0 MiB in 11s) at 10:42:20, DHCP acknowledged 192.0.2.23 at 10:43:00, no agent lookup in 600 s"},
		{name: "a firmware DHCP after the ramdisk still wants a boot file", records: []stage.Record{prepared, script, kernel, ramdisk, pxeAgain}, now: at(61 + 600), stalled: true,
			want: "boot configuration written at 10:42:00, boot script /boot/52-54-00-12-34-56.ipxe fetched at 10:42:07, kernel downloaded (8.0 MiB in 2s) at 10:42:09, ramdisk downloaded (90.0 MiB in 11s) at 10:42:20, DHCP acknowledged 192.0.2.23 at 10:43:01, no boot file request in 600 s"},
		{name: "an earlier attempt does not count", records: []stage.Record{prepared, offer, prepared}, now: at(10)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, stalled := stage.Check(tc.records, tc.now, d)
			if stalled != tc.stalled {
				t.Fatalf("stalled = %v, want %v (%+v)", stalled, tc.stalled, s)
			}
			if s.Message != tc.want {
				t.Errorf("message:\n got %q\nwant %q", s.Message, tc.want)
			}
		})
	}
}

func TestNegativeDeadlineDisablesItsCheck(t *testing.T) {
	t0 := time.Unix(0, 0)
	recs := []stage.Record{{Stage: stage.Prepared, At: t0}}
	if _, stalled := stage.Check(recs, t0.Add(24*time.Hour), stage.Deadlines{DHCP: -1}); stalled {
		t.Fatal("a negative DHCP deadline still stalled the boot")
	}
	if _, stalled := stage.Check(recs, t0.Add(stage.DefaultDHCP), stage.Deadlines{}); !stalled {
		t.Fatal("the default DHCP deadline did not apply")
	}
}

func TestNoteReplacesThePhrase(t *testing.T) {
	r := stage.Record{Stage: stage.DHCPOffer, Addr: "192.0.2.9", Note: "DHCP offered 192.0.2.9 (read back)"}
	if got := r.Phrase(); got != r.Note {
		t.Fatalf("Phrase() = %q, want the note", got)
	}
}

func TestRecorderKeepsRecordsInOrderAndCopies(t *testing.T) {
	var r stage.Recorder
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Go(func() { r.ObserveBootStage(stage.Record{Stage: stage.DHCPOffer, Bytes: int64(i)}) })
	}
	wg.Wait()
	r.ObserveBootStage(stage.Record{Stage: stage.Kernel})
	got := r.Records()
	if len(got) != 101 || got[100].Stage != stage.Kernel {
		t.Fatalf("%d records, last %+v", len(got), got[len(got)-1])
	}
	got[0].Stage = stage.Ramdisk
	if r.Records()[0].Stage != stage.DHCPOffer {
		t.Fatal("Records returned the recorder's own slice")
	}
}

func TestSummaryOfALoopNamesTheStartAndTheEnd(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	recs := []stage.Record{{Stage: stage.Prepared, At: t0}}
	for i := 1; i <= 500; i++ {
		recs = append(recs, stage.Record{Stage: stage.DHCPOffer, Addr: "192.0.2.23", At: t0.Add(time.Duration(i) * time.Second)})
	}
	got := stage.Summary(recs)
	want := "boot configuration written at 10:00:00, (489 more stages), DHCP offered 192.0.2.23 at 10:08:10"
	if !strings.HasPrefix(got, want) || !strings.HasSuffix(got, "DHCP offered 192.0.2.23 at 10:08:20") {
		t.Fatalf("Summary = %q", got)
	}
	if n := strings.Count(got, "DHCP offered"); n != stage.MaxSummaryRecords-1 {
		t.Fatalf("Summary names %d offers, want %d", n, stage.MaxSummaryRecords-1)
	}
	if short := recs[:stage.MaxSummaryRecords]; strings.Contains(stage.Summary(short), "more stages") {
		t.Fatal("a short attempt lost records")
	}
}
