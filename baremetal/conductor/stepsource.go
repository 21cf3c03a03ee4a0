package conductor

import (
	"log/slog"

	"github.com/anvilmetal/anvil/driver"
	"github.com/anvilmetal/anvil/steps"
)

// warnIgnoredOverrides logs one warning per priority override key the
// planner ignored, naming the option and the key, so that a misspelt key
// is heard of while the others keep working.
func warnIgnoredOverrides(log *slog.Logger, p *steps.Planner) {
	for _, ig := range p.Ignored() {
		log.Warn("ignoring a step priority override that no step can match", "option", ig.Option, "key", ig.Key, "reason", ig.Reason)
	}
}

// inBandInterfaces names the interfaces of d whose implementation is
// agent-based (implements AgentBased and says so): the planner reads the
// agent's steps of those interfaces only, following steps.Contributes
// (agent RAID steps, for example, only with an agent RAID interface).
func inBandInterfaces(d *driver.Driver) []string {
	var out []string
	for _, k := range []driver.Kind{driver.KindDeploy, driver.KindRAID} {
		if ab, ok := d.Interface(k).(AgentBased); ok && ab.AgentBased() {
			out = append(out, string(k))
		}
	}
	return out
}
