// Package realipa holds Anvil's test against the real Ironic Python Agent
// (IPA, branch 2023.1): the agent's own process, started from an unpacked
// source tree, looks a node up at an Anvil conductor over 127.0.0.1,
// heartbeats, and runs a direct deploy's write_image with IPA's real
// image_info validation, download, checksum check and write.
//
// The test runs only when ANVIL_TEST_IPA_SRC names the unpacked source
// directory (the one holding ironic_python_agent/); .ci/run unpacks
// ../shared/peers/ironic-python-agent-2023.1.tar.gz and installs the
// Debian packages IPA needs. IPA never runs with its own hardware
// managers here: testdata/python provides a hardware manager whose install
// device is a temporary file and a stand-by extension that never powers
// off or reboots the host (IPA's clean steps erase disks; its power_off
// runs poweroff).
package realipa
