package steps

import (
	"strconv"
	"testing"
)

// TestContributes is the decision table of Ironic's agent-based
// interfaces: they contribute agent steps only, except the deploy steps
// of the deploy interface (declared steps, then the agent's they do not
// shadow); interfaces that are not agent-based contribute their declared
// steps only, so agent RAID steps are read only with the agent RAID
// interface; nothing agent-based changes verify steps.
func TestContributes(t *testing.T) {
	for _, tc := range []struct {
		kind       Kind
		iface      string
		agentBased bool
		want       Contribution
	}{
		{Deploy, InterfaceDeploy, true, FromDriverThenAgent},
		{Clean, InterfaceDeploy, true, FromAgent},
		{Service, InterfaceDeploy, true, FromAgent},
		{Verify, InterfaceDeploy, true, FromDriver},
		{Clean, InterfaceRAID, true, FromAgent},
		{Deploy, InterfaceRAID, true, FromAgent},
		{Service, InterfaceRAID, true, FromAgent},
		{Verify, InterfaceRAID, true, FromDriver},
		{Clean, InterfaceRAID, false, FromDriver},
		{Deploy, InterfaceRAID, false, FromDriver},
		{Clean, InterfaceDeploy, false, FromDriver},
		{Deploy, InterfaceDeploy, false, FromDriver},
		{Service, InterfaceDeploy, false, FromDriver},
		{Clean, InterfaceBIOS, false, FromDriver},
		{Deploy, InterfaceManagement, false, FromDriver},
	} {
		if got := Contributes(tc.kind, tc.iface, tc.agentBased); got != tc.want {
			t.Errorf("Contributes(%s, %s, agent-based=%v) = %v, want %v", tc.kind, tc.iface, tc.agentBased, got, tc.want)
		}
	}
}

// TestGatherFollowsContributes checks that Gather applies the table: with
// the agent deploy interface, a clean step the deploy implementation
// declares is not collected while the agent's step of the same name is,
// and agent RAID steps are ignored unless the RAID interface is in-band.
func TestGatherFollowsContributes(t *testing.T) {
	src := Source{
		Driver: map[string][]Step{
			InterfaceDeploy: {{Interface: InterfaceDeploy, Name: "erase", Priority: 50}},
			InterfaceRAID:   {{Interface: InterfaceRAID, Name: "oob", Priority: 40}},
		},
		Agent: map[string][]Step{
			InterfaceDeploy: {{Interface: InterfaceDeploy, Name: "erase", Priority: 45}},
			InterfaceRAID:   {{Interface: InterfaceRAID, Name: "inband", Priority: 30}},
		},
	}
	keys := func(list []Step) string {
		out := ""
		for _, s := range list {
			out += s.Key() + "@" + strconv.Itoa(s.Priority) + " "
		}
		return out
	}
	for _, tc := range []struct {
		inBand []string
		want   string
	}{
		{nil, "deploy.erase@50 raid.oob@40 "},
		{[]string{InterfaceDeploy}, "deploy.erase@45 raid.oob@40 "},
		{[]string{InterfaceDeploy, InterfaceRAID}, "deploy.erase@45 raid.inband@30 "},
	} {
		src.InBand = tc.inBand
		if got := keys(Gather(Clean, src, GatherOptions{Sorted: true})); got != tc.want {
			t.Errorf("in-band %v: gathered %q, want %q", tc.inBand, got, tc.want)
		}
	}
}
