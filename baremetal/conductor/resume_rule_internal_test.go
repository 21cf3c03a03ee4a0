package conductor

import "testing"

// TestResumeRule checks resumable's decision table, one row per case of
// docs/takeover.md ("Resume, restart, wait or fail").
func TestResumeRule(t *testing.T) {
	const step = "deploy.write_image"
	declared := func(f resumeFacts) resumeFacts { f.declared = true; f.step = step; return f }
	inBand := func(f resumeFacts) resumeFacts { f.agentBased = true; f.step = step; return f }
	tests := []struct {
		name   string
		facts  resumeFacts
		want   resumeDecision
		reason string
	}{
		{"reserved step is re-run", resumeFacts{reserved: true, agent: agentFailed},
			resumeRerun, "the conductor runs itself and is idempotent"},
		{"driver cannot be loaded", resumeFacts{driverErr: "no such driver"},
			resumeNo, "its driver cannot be loaded: no such driver"},
		{"declared, safe by implementation", declared(resumeFacts{safeByImpl: true, agentBased: true, agent: agentFailed}),
			resumeRerun, "its implementation declares safe to re-run"},
		{"declared, safe by options", declared(resumeFacts{safeByOpts: true}),
			resumeRerun, "the conductor's options declare safe to re-run"},
		{"declared, agent runs this step", declared(resumeFacts{agentBased: true, agent: agentThisStep, detail: "RUNNING"}),
			resumeWait, "handed to the agent, which knows it (RUNNING)"},
		{"declared hand-off, agent never received it", declared(resumeFacts{agentBased: true, handsOff: true, agent: agentNoStep}),
			resumeRerun, "it only hands work to the agent, which never received it"},
		{"declared, not a hand-off, agent never received it", declared(resumeFacts{agentBased: true, agent: agentNoStep}),
			resumeNo, "step deploy.write_image is not declared safe to re-run"},
		{"declared hand-off, agent cannot say", declared(resumeFacts{agentBased: true, handsOff: true, agent: agentNotAsked}),
			resumeNo, "step deploy.write_image is not declared safe to re-run"},
		{"declared, agent moved on", declared(resumeFacts{agentBased: true, handsOff: true, agent: agentOtherStep}),
			resumeNo, "step deploy.write_image is not declared safe to re-run"},
		{"declared, no agent", declared(resumeFacts{handsOff: true, agent: agentThisStep}),
			resumeNo, "step deploy.write_image is not declared safe to re-run"},
		{"undeclared, no agent", resumeFacts{step: step},
			resumeNo, "step deploy.write_image is provided by no interface of the node"},
		{"in-band, agent knows this step", inBand(resumeFacts{agent: agentThisStep, detail: "SUCCEEDED"}),
			resumeWait, "known to the agent (SUCCEEDED)"},
		{"in-band, agent's last step is another", inBand(resumeFacts{agent: agentOtherStep}),
			resumeRerun, "the agent never received"},
		{"in-band, agent never received it", inBand(resumeFacts{agent: agentNoStep}),
			resumeRerun, "the agent never received"},
		{"in-band, agent gone", inBand(resumeFacts{agent: agentUnreachable, detail: "404"}),
			resumeWait, "unknown: the agent is not reachable (404)"},
		{"in-band, other agent error", inBand(resumeFacts{agent: agentFailed, detail: "the node's agent URL is unknown"}),
			resumeNo, "the node's agent URL is unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, reason := resumeRule(tt.facts)
			if got != tt.want || reason != tt.reason {
				t.Errorf("resumeRule(%+v) = %d, %q; want %d, %q", tt.facts, got, reason, tt.want, tt.reason)
			}
		})
	}
}
