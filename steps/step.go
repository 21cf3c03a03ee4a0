package steps

// Kind names a family of steps: the operation a step list belongs to.
type Kind string

// The step kinds Ironic knows.
const (
	Clean   Kind = "clean"
	Deploy  Kind = "deploy"
	Service Kind = "service"
	Verify  Kind = "verify"
)

// ArgInfo describes one argument a step accepts, as Ironic's argsinfo does.
type ArgInfo struct {
	Description string `json:"description"`
	Required    bool   `json:"required,omitempty"`
}

// Step is one step: the metadata an interface declares for it and, in a
// plan, the arguments it is run with. The JSON shape is the one Ironic
// keeps in driver_internal_info and exchanges with the agent.
type Step struct {
	Interface       string             `json:"interface"`
	Name            string             `json:"step"`
	Priority        int                `json:"priority"`
	Args            map[string]any     `json:"args,omitempty"`
	ArgsInfo        map[string]ArgInfo `json:"argsinfo,omitempty"`
	Abortable       bool               `json:"abortable"`
	RequiresRamdisk bool               `json:"requires_ramdisk,omitempty"`
	RebootRequested bool               `json:"reboot_requested,omitempty"`
}
