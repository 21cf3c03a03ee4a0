package conductor

import (
	"errors"
	"testing"
	"time"

	"github.com/anvilmetal/anvil/agentclient"
	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/statemachine"
)

// TestDecideFastTrack table-tests Ironic's is_fast_track rule (reference
// §8): able, not servicing, powered on (live) and an agent heard from
// within fast_track_timeout (or an inspection that recent).
func TestDecideFastTrack(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	hb := func(ago time.Duration) string { return now.Add(-ago).Format(agentclient.LastHeartbeatLayout) }
	base := fastTrackFacts{Able: true, State: statemachine.Available, Power: driver.PowerOn, AgentURL: true,
		LastHeartbeat: hb(10 * time.Second), Now: now, Timeout: 300 * time.Second}
	for _, tc := range []struct {
		name string
		edit func(f *fastTrackFacts)
		want fastTrackReason
	}{
		{"fresh heartbeat, power on", func(*fastTrackFacts) {}, fastTrackOK},
		{"heartbeat just inside the timeout", func(f *fastTrackFacts) { f.LastHeartbeat = hb(299 * time.Second) }, fastTrackOK},
		{"heartbeat exactly at the timeout", func(f *fastTrackFacts) { f.LastHeartbeat = hb(300 * time.Second) }, fastTrackNoAgent},
		{"stale heartbeat", func(f *fastTrackFacts) { f.LastHeartbeat = hb(301 * time.Second) }, fastTrackNoAgent},
		{"heartbeat stamped in the future (skew)", func(f *fastTrackFacts) { f.LastHeartbeat = hb(-5 * time.Second) }, fastTrackOK},
		{"shorter configured timeout", func(f *fastTrackFacts) { f.Timeout = 5 * time.Second }, fastTrackNoAgent},
		{"no heartbeat recorded", func(f *fastTrackFacts) { f.LastHeartbeat = "" }, fastTrackNoAgent},
		{"unparsable heartbeat", func(f *fastTrackFacts) { f.LastHeartbeat = "yesterday" }, fastTrackNoAgent},
		{"no agent URL", func(f *fastTrackFacts) { f.AgentURL = false }, fastTrackNoAgent},
		{"no URL but recent inspection", func(f *fastTrackFacts) {
			f.AgentURL, f.InspectionFinished = false, now.Add(-time.Minute)
		}, fastTrackOK},
		{"old inspection, stale heartbeat", func(f *fastTrackFacts) {
			f.InspectionFinished, f.LastHeartbeat = now.Add(-time.Hour), hb(time.Hour)
		}, fastTrackNoAgent},
		{"inspecting ignores the agent URL", func(f *fastTrackFacts) { f.State = statemachine.InspectWait }, fastTrackNoAgent},
		{"power off", func(f *fastTrackFacts) { f.Power = driver.PowerOff }, fastTrackPoweredOff},
		{"power unknown", func(f *fastTrackFacts) {
			f.Power, f.PowerErr = "", errors.New("bmc timeout")
		}, fastTrackPowerUnknown},
		{"power off beats a recent inspection", func(f *fastTrackFacts) {
			f.Power, f.InspectionFinished = driver.PowerOff, now
		}, fastTrackPoweredOff},
		{"not able (disabled or last_error)", func(f *fastTrackFacts) { f.Able = false }, fastTrackNotAble},
		{"servicing", func(f *fastTrackFacts) { f.State = statemachine.ServiceWait }, fastTrackServicing},
		{"firmware update in progress", func(f *fastTrackFacts) { f.FirmwareUpdating = true }, fastTrackServicing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := base
			tc.edit(&f)
			if got := decideFastTrack(f); got != tc.want {
				t.Fatalf("decideFastTrack = %q, want %q", got, tc.want)
			}
		})
	}
}
