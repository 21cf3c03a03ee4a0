package agentclient

// LookupResponse is the 200 answer of GET /v1/lookup.
type LookupResponse struct {
	Node   LookupNode   `json:"node"`
	Config LookupConfig `json:"config"`
}

// LookupNode is the node part of a lookup answer: only the fields Ironic
// returns there, with secrets masked.
type LookupNode struct {
	UUID               string         `json:"uuid"`
	Properties         map[string]any `json:"properties"`
	InstanceInfo       map[string]any `json:"instance_info"`
	DriverInternalInfo map[string]any `json:"driver_internal_info"`
	Links              []Link         `json:"links"`
}

// LookupConfig is the config section of a lookup answer: the conductor
// settings the agent adopts.
type LookupConfig struct {
	Metrics                     MetricsConfig         `json:"metrics"`
	MetricsStatsd               MetricsStatsdConfig   `json:"metrics_statsd"`
	HeartbeatTimeout            int                   `json:"heartbeat_timeout"`
	AgentContainers             AgentContainersConfig `json:"agent_containers"`
	AgentToken                  string                `json:"agent_token"`
	AgentTokenRequired          bool                  `json:"agent_token_required"`
	AgentMD5ChecksumEnable      bool                  `json:"agent_md5_checksum_enable"`
	DisableDeepImageInspection  bool                  `json:"disable_deep_image_inspection"`
	PermittedImageFormats       []string              `json:"permitted_image_formats"`
	AgentSkipBMCDetect          bool                  `json:"agent_skip_bmc_detect"`
	EnableBIOSBootloaderInstall bool                  `json:"enable_bios_bootloader_install"`
	TLSMinVersion               string                `json:"tls_min_version"`
	TLSCipherSuites             *string               `json:"tls_cipher_suites"`
}

// MetricsConfig is the agent's metrics settings ([metrics] in Ironic).
type MetricsConfig struct {
	Backend            string  `json:"backend"`
	PrependHost        bool    `json:"prepend_host"`
	PrependUUID        bool    `json:"prepend_uuid"`
	PrependHostReverse bool    `json:"prepend_host_reverse"`
	GlobalPrefix       *string `json:"global_prefix"`
}

// MetricsStatsdConfig is where a statsd metrics backend sends to.
type MetricsStatsdConfig struct {
	StatsdHost string `json:"statsd_host"`
	StatsdPort int    `json:"statsd_port"`
}

// AgentContainersConfig is the container-based steps configuration.
type AgentContainersConfig struct {
	AllowArbitraryContainers bool     `json:"allow_arbitrary_containers"`
	AllowedContainers        []string `json:"allowed_containers"`
	ContainerStepsFile       string   `json:"container_steps_file"`
	Runner                   string   `json:"runner"`
	PullOptions              string   `json:"pull_options"`
	RunOptions               string   `json:"run_options"`
}

// DefaultLookupConfig returns the config section Ironic sends with its
// default settings (no metrics backend, TLS 1.3 minimum).
func DefaultLookupConfig() LookupConfig {
	return LookupConfig{
		Metrics: MetricsConfig{
			Backend:            "noop",
			PrependHostReverse: true,
		},
		MetricsStatsd: MetricsStatsdConfig{StatsdHost: "localhost", StatsdPort: 8125},
		AgentContainers: AgentContainersConfig{
			AllowedContainers:  []string{},
			ContainerStepsFile: "/etc/ironic-python-agent.d/mysteps.yaml",
			Runner:             "podman",
			PullOptions:        "--tls-verify=false",
			RunOptions:         "--rm --network=host --tls-verify=false",
		},
		HeartbeatTimeout:       int(DefaultHeartbeatTimeout.Seconds()),
		AgentTokenRequired:     true,
		AgentMD5ChecksumEnable: true,
		PermittedImageFormats:  []string{"raw", "gpt", "qcow2", "iso"},
		TLSMinVersion:          "1.3",
	}
}
