// Package metal3 renders anvild's configuration from the environment
// Metal3 passes to its Ironic container, so that one anvild container
// replaces the Ironic pod of the baremetal-operator's ironic-deployment
// (the ironic-bmo-configmap ConfigMap, the ironic-htpasswd Secret
// mounted at /auth/ironic, the TLS Secret mounted at /certs/ironic).
// The container's entrypoint, anvil-metal3, renders the file and runs
// anvild on it; the README's "Metal3" section lists the variables.
package metal3
