package webui_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/baremetal"
	"github.com/anvilmetal/anvil/webui"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// history builds entries from compact lines: seconds after t0, event
// type, event, severity.
type line struct {
	at                   float64
	typ, event, severity string
}

func entries(t0 time.Time, lines []line) []*baremetal.HistoryEntry {
	out := make([]*baremetal.HistoryEntry, len(lines))
	for i, l := range lines {
		sev := l.severity
		if sev == "" {
			sev = baremetal.HistoryInfo
		}
		out[i] = &baremetal.HistoryEntry{ID: int64(i + 1), Event: l.event, EventType: l.typ, Severity: sev, Message: l.event,
			CreatedAt: t0.Add(time.Duration(l.at * float64(time.Second)))}
	}
	return out
}

// TestBuildTimeline checks the timeline of a history holding a manage, a
// provide, a deploy that boots twice and fails a step, a redeploy that
// is still running, and entries outside every phase, against
// testdata/timeline.golden.json (rewritten with -update).
func TestBuildTimeline(t *testing.T) {
	t0 := time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC)
	hist := entries(t0, []line{
		{0, "provisioning", "node enrolled", ""},
		{1, "maintenance", "maintenance", ""},
		{2, "provisioning", "provision state verifying", ""},
		{2.5, "provisioning", "provision state manageable", ""},
		{3, "provisioning", "provision state cleaning", ""},
		{3.2, "boot", "boot prepared", ""},
		{3.4, "provisioning", "provision state clean wait", ""},
		{5, "boot", "dhcp ack", ""},
		{6, "boot", "kernel", ""},
		{9, "boot", "ramdisk", ""},
		{12, "boot", "agent lookup", ""},
		{12.5, "boot", "agent heartbeat", ""},
		{12.6, "provisioning", "provision state cleaning", ""},
		{12.7, "clean", "step_start deploy.erase_devices_metadata", ""},
		{12.8, "provisioning", "provision state clean wait", ""},
		{20, "agent", "agent heartbeat", ""},
		{20.1, "provisioning", "provision state cleaning", ""},
		{20.2, "clean", "step_end deploy.erase_devices_metadata", ""},
		{20.5, "provisioning", "provision state available", ""},
		{21, "boot", "agent lookup", ""},
		{30, "power", "power state corrected", baremetal.HistoryWarning},
		{40, "provisioning", "provision state deploying", ""},
		{40.1, "boot", "boot prepared", ""},
		{40.2, "provisioning", "provision state wait call-back", ""},
		{45, "boot", "dhcp ack", ""},
		{46, "boot", "tftp failed", baremetal.HistoryWarning},
		{50, "boot", "boot prepared", ""},
		{52, "boot", "kernel", ""},
		{55, "boot", "agent heartbeat", ""},
		{55.1, "provisioning", "provision state deploying", ""},
		{55.2, "deploy", "step_start deploy.write_image", ""},
		{55.3, "provisioning", "provision state wait call-back", ""},
		{85, "agent", "agent heartbeat", ""},
		{115, "agent", "agent heartbeat", ""},
		{115.1, "provisioning", "provision state deploying", ""},
		{115.2, "deploy", "step_end deploy.write_image", baremetal.HistoryError},
		{115.3, "provisioning", "provision state deploy failed", baremetal.HistoryError},
		{150, "boot", "boot prepared", ""},
		{151, "boot", "dhcp ack", ""},
		{200, "provisioning", "provision state deploying", ""},
		{201, "deploy", "step_start deploy.deploy", ""},
	})
	tl := webui.BuildTimeline("1be26c0b-03f2-4d2e-ae87-c02d7f33c123", hist, t0.Add(210*time.Second))
	got, err := json.MarshalIndent(tl, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	golden := filepath.Join("testdata", "timeline.golden.json")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("timeline differs from %s (run with -update after checking):\n%s", golden, got)
	}

	// What the golden file must say, checked here so that -update cannot
	// bless a wrong timeline.
	if len(tl.Phases) != 4 {
		t.Fatalf("%d phases, want manage, clean, deploy and the running deploy", len(tl.Phases))
	}
	names := [4]string{tl.Phases[0].Name, tl.Phases[1].Name, tl.Phases[2].Name, tl.Phases[3].Name}
	if names != [4]string{"manage", "clean", "deploy", "deploy"} {
		t.Fatalf("phases %v", names)
	}
	deploy := tl.Phases[2]
	if !deploy.Failed || deploy.Result != "deploy failed" || deploy.Open {
		t.Fatalf("failed deploy phase %+v", deploy)
	}
	if !tl.Phases[3].Open || tl.Phases[3].End != tl.Now {
		t.Fatalf("running deploy %+v: want open, ending now", tl.Phases[3])
	}
	lane := func(p webui.Phase, name string) []webui.Bar {
		for _, l := range p.Lanes {
			if l.Name == name {
				return l.Bars
			}
		}
		t.Fatalf("phase %s has no lane %s", p.Name, name)
		return nil
	}
	waits := 0
	for _, b := range lane(deploy, "state") {
		if b.Kind == "wait" {
			waits++
			if b.Label != "wait call-back" || b.End <= b.Start {
				t.Fatalf("wait bar %+v", b)
			}
		}
	}
	if waits != 2 {
		t.Fatalf("%d waits in the deploy, want 2", waits)
	}
	steps := lane(deploy, "steps")
	if len(steps) != 1 || steps[0].Label != "deploy.write_image" || !steps[0].Failed || steps[0].End-steps[0].Start != 60000 {
		t.Fatalf("deploy steps %+v: want write_image failed after 60 s", steps)
	}
	boot := lane(deploy, "boot")
	if len(boot) != 6 || boot[1].Label != "dhcp ack" || boot[1].End != boot[2].Start || !boot[2].Failed || boot[2].End != boot[2].Start ||
		boot[5].Label != "agent heartbeat" {
		t.Fatalf("deploy boot stages %+v: two boots, the first failing at TFTP", boot)
	}
	beats := lane(deploy, "agent")
	if len(beats) != 3 || beats[0].End != beats[1].Start || beats[2].End != beats[2].Start {
		t.Fatalf("heartbeats %+v", beats)
	}
	if ev := lane(deploy, "events"); len(ev) != 1 || !ev[0].Failed || ev[0].Label != "deploy failed" {
		t.Fatalf("deploy events %+v: want the failure marked", ev)
	}
	for _, b := range lane(tl.Phases[1], "events") {
		if b.Label == "power state corrected" {
			t.Fatal("an entry between phases was drawn in a phase")
		}
	}
	// The clean's boot goes on after the phase: the agent's lookup that
	// came after the node rested is drawn in it, past its end; a boot
	// prepared between phases is not drawn at all.
	cb := lane(tl.Phases[1], "boot")
	if l := cb[len(cb)-1]; l.Label != "agent lookup" || l.Start <= tl.Phases[1].End {
		t.Fatalf("clean boot stages %+v: want the lookup after the phase's end last", cb)
	}
	if len(boot) != 6 {
		t.Fatalf("the deploy draws %d boot stages; a boot prepared after it ended must not be drawn", len(boot))
	}
}

// TestBuildTimelineEmpty checks a node with no provisioning: no phase.
func TestBuildTimelineEmpty(t *testing.T) {
	tl := webui.BuildTimeline("n", entries(time.Unix(0, 0), []line{{0, "provisioning", "node enrolled", ""}, {1, "provisioning", "provision state enroll", ""}}), time.Unix(5, 0))
	if len(tl.Phases) != 0 {
		t.Fatalf("phases %+v, want none", tl.Phases)
	}
	b, _ := json.Marshal(tl)
	if !bytes.Contains(b, []byte(`"phases":[]`)) {
		t.Fatalf("JSON %s: want an empty list of phases", b)
	}
}
