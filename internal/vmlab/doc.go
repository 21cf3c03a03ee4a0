// Package vmlab is the virtual-machine lab: QEMU virtual machines under
// TCG as bare metal, on a provisioning network in a network namespace the
// test creates, booted from a boot server under test, with guest images
// built from Debian packages and cached on the machine.
//
// A Network is a namespace with a bridge at 192.0.2.1/24 and a tap per VM;
// nothing connects it to the host's network. Go servers listen in it
// through Network.Do; programs (QEMU, dnsmasq) run in it through
// Network.Command and Network.Start, which track them and stop them by PID
// on Close. StartVM starts QEMU (TCG only; KVM guests hang on the virtual
// machines these tests run on) with SeaBIOS and the NIC's iPXE ROM, or
// OVMF, and a serial console read line by line (Console.WaitFor). Images
// come from a Cache keyed by their inputs: DebianKernel downloads the
// kernel package linux-image-amd64 depends on; MarkerInitramfs packs a
// static busybox and an /init that prints a marker and the kernel command
// line and powers off.
//
// RunNetbootScenario is the real-firmware test of a boot server: a VM
// boots over the network from whatever the given BootServer starts (the
// dnsmasq reference of DnsmasqBootServer, or Anvil's netboot), the test
// waits for the marker on the console, checks the command line and the
// server's stage records, and logs each stage's time.
//
// # Usage
//
//	func TestBoot(t *testing.T) {
//		n := vmlab.NewTestNetwork(t) // skips unless ANVIL_TEST_QEMU=1 and root
//		vmlab.RunNetbootScenario(t, n, vmlab.Scenario{
//			Expect: []stage.Stage{stage.DHCPAck, stage.Script, stage.Kernel, stage.Ramdisk},
//		}, vmlab.DnsmasqBootServer())
//	}
//
// One VM at a time on a 2-core machine: TCG costs a host core per vCPU.
package vmlab
