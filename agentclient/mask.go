package agentclient

import "github.com/anvilmetal/anvil/internal/mask"

// MaskSecrets returns a deep copy of m in which every value whose key names
// a secret is replaced by "******" (MaskedToken), recursing into nested
// objects and lists, and in which secrets written inside other strings
// (key=value, JSON, URL userinfo, ...) are masked too, as Ironic masks a
// node before sending it to the agent. The rules are Anvil's one masker's
// (internal/mask), the same baremetal.MaskSecrets applies. m is not
// modified; a nil m gives an empty map.
func MaskSecrets(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return mask.Map(m)
}
