// Package vmlab is the virtual-machine lab: QEMU virtual machines under
// TCG as bare metal, on a provisioning network in a network namespace the
// test creates, booted from a boot server under test, with guest images
// built from Debian packages and cached on the machine.
//
// A Network is a namespace with a bridge at 192.0.2.1/24 and a tap per VM;
// nothing connects it to the host's network. NetworkOptions.Family makes
// it IPv6-only (the bridge at fd61:6e76:696c::1/64, a unique local
// prefix, and no IPv4 address) or dual-stack (both); a Lab on such a
// network runs Anvil's DHCPv6 server and router advertisements with the
// managed flag, and its ramdisk configures its NIC by DHCPv6. Go servers listen in it
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
// # Wiring a boot server
//
// A BootServer gets a BootSetup and must, on the bridge BridgeName at
// ServerIP (sockets opened through Network.Do, or a blocking Run through
// Network.Go): answer DHCP authoritatively from PoolStart..PoolEnd; hand a
// PXE client iPXE over TFTP (undionly.kpxe for client architecture 0,
// snponly.efi for 7 and 9, from /usr/lib/ipxe) and an iPXE client (user
// class "iPXE") the HTTP URL of a script for the setup's MAC; serve that
// script, which boots Kernel with "initrd=<name>" (the UEFI kernel stub
// finds the initrd by it) and every word of Params, and Initrd; report each
// stage to Observer. With SeaBIOS the NIC's ROM is already iPXE, so a BIOS
// boot has no TFTP stage; the UEFI scenario with NoROM has one.
//
// Timings seen under TCG on a loaded 2-core machine: iPXE's first DHCP
// discover 2-3 s after QEMU starts; "Configuring ... ok" 15-20 s after the
// DHCP acknowledgement, because iPXE waits for an IPv6 router
// advertisement that never comes (0.1 s with
// NetworkOptions.RouterAdvertisements); the 8 MiB kernel
// in under 1 s; the kernel's first line 7-25 s after the initramfs
// download; the marker 33-35 s after QEMU starts with BIOS, 83 s with
// OVMF. With RouterAdvertisements, Anvil's boot server (netboot's
// TestVMFirmwareBoots) brings the marker 13-16 s after QEMU starts with
// BIOS (iPXE over HTTP, pxelinux over TFTP), 16-22 s with OVMF (the
// iPXE ROM, OVMF's PXE to snponly.efi, GRUB over TFTP).
//
// A Scenario can also end at a console text other than the marker
// (Until: LocalDiskMarker, printed by the boot sector of LocalDiskImage
// attached as Disk), to test a boot server's "boot from local disk";
// Network.AddHost puts a second host (a veth on the bridge) beside the
// boot server, such as an address-only DHCP server beside a proxyDHCP.
// Every process a Network starts is forked from one thread that lives as
// long as the Network, so that its Pdeathsig backstop never fires early.
//
// # Real machines' images
//
// BuildIPARamdisk builds the stock Ironic Python Agent ramdisk with the
// public builder, package ramdisk (Debian 12 packages through
// debootstrap, IPA's source tarball from IPATarballEnv, byte code
// compiled at build time, an /init that takes a DHCP address on the
// first NIC, runs the agent and prints each stage with the kernel's
// uptime, and poweroff/reboot for the agent); BuildOSImage builds the
// whole-disk image deploys write (raw and qcow2, with their checksums),
// whose init prints OSMarkerPrefix with the hostname and a user_data
// value from the config drive, from the shell script in ipa/ (embedded,
// part of the cache key). Both are cached; BuildLabImages gets both.
// TestIPARamdiskLooksUpAndHeartbeats logs the ramdisk's boot stage by
// stage (RamdiskStages) and the agent's slow commands before its lookup.
//
// # A machine with a BMC, provisioned end to end
//
// StartBMCMachine makes a VM whose BMC is Debian's ipmi_sim on 127.0.0.1
// in the host's namespace: IPMI power control starts QEMU in the lab
// namespace (boot order from the boot device set over IPMI), stops it and
// restarts it; power status is whether QEMU runs; the VM has an in-band
// BMC device and its serial console is ipmi_sim's SOL as well as Console.
// TestVMProvisionIPMI (ANVIL_TEST_VM_E2E=1 with ANVIL_TEST_QEMU=1 and
// ANVIL_TEST_IPA_TARBALL) provisions one such machine through the
// conductor with the real plugins/ipmi, Anvil's boot server, the direct
// deploy and agent inspect interfaces, the stock IPA ramdisk and the OS
// image, and logs every phase's time with its boot stages, steps and
// heartbeats. Seen here at load 14-20 (two cores shared): inspection
// 250-370 s (the ramdisk's first boot: iPXE to the agent's start 60-120
// s, then its inventory), cleaning by the same agent (fast track) 30-50
// s, the raw deploy to the OS marker 60-125 s.
//
// # The lab as a library
//
// StartLab (lab.go) is that setup without a *testing.T: given a LabBMC
// (IPMILabBMC, or the test's Redfish one), the BMC's plugin executable
// (BuildPlugin) and the images (BuildLabImages, or built by StartLab
// from the IPA tarball), it starts the boot server, the image server,
// the conductor with its agent API and the machine on a Network (its
// own, with RouterAdvertisements, when none is given) and returns a Lab
// whose Close stops all of it, processes by PID, and removes what it
// made. The Lab enrolls the node (EnrollNode), waits for its states
// (WaitState), reads the OS marker (OSMarker), reports a phase's boot
// stages, steps and heartbeats (PhaseReport) and explains a failure
// (Diagnostics, console masked). The end-to-end tests' startE2ELab is a
// thin wrapper over it; examples/vmlab runs one deploy with it.
//
// # A machine with a Redfish BMC
//
// StartRedfishMachine makes a VM whose BMC is a Redfish service on
// 127.0.0.1 in the host's namespace (HTTP Basic; rfService, strict as a
// real BMC about reset types, boot override values, writable properties,
// body sizes and a full CD drive): ComputerSystem.Reset starts QEMU in
// the lab namespace with the boot order of the boot override (Cd, Pxe,
// Hdd; a Once override is spent by that boot) and stops it by PID; its
// Manager's virtual CD downloads the InsertMedia image (bounded) into a
// file that goes into the running QEMU's ide-cd drive through QMP
// blockdev-change-medium, and on the next start's command line.
// BuildIPAISO makes the IPA ramdisk a bootable ISO (xorriso, ISOLINUX,
// BIOS) whose isolinux.cfg append line the redfish-virtual-media boot
// interface extends with the node's parameters; the ramdisk still takes
// its address by DHCP from the boot server on the bridge.
// TestVMProvisionRedfish (the same environment as TestVMProvisionIPMI,
// plus xorriso and isolinux) provisions such a machine through the
// conductor with the real plugins/redfish and redfish-virtual-media:
// manage, inspect, provide, the raw deploy and undeploy. Seen here at
// load 4-10 (the IPMI test's VM beside it): inspection 148 s (QEMU's
// start to the agent's 42 s, ISOLINUX loading the 90 MiB ISO's kernel
// and initramfs included), cleaning by the same agent 20 s (the BMC
// fetching the re-mastered ISO again into the running machine's drive),
// the raw deploy to the OS marker 32 s, undeploy 142 s; the whole test
// 6 minutes.
//
// # UEFI machines
//
// LabOptions.Firmware UEFI gives the lab's machine (either BMC) OVMF
// with its own copy of the variable store, kept across power cycles as a
// real machine's NVRAM, the boot order as bootindex (which OVMF reads),
// and a NIC without the iPXE ROM, so that OVMF's own PXE asks the boot
// server for a file by its architecture (option 93: snponly.efi over
// TFTP); BMCMachine.SetHTTPBoot turns OVMF's PXE off for UEFI HTTP boot
// (http-ipxe, and http, whose GRUB BuildHTTPGRUB builds for the lab's
// boot server with netboot/grubimage). The node gets boot_mode:uefi and the UEFI OS image
// (BuildUEFIOSImage: GPT, an EFI System Partition with two GRUB loaders,
// the one named by EFI/anvil/BOOTX64.CSV and the removable-media
// fallback, each printing which it is). The direct deploy interface's
// prepare_instance_boot asks the agent for install_bootloader, whose
// efibootmgr makes the boot entry "anvil-os"; TestVMProvisionUEFI and
// TestVMProvisionUEFIRedfish check that OVMF loads that entry after the
// last power on and that the boot server saw nothing since.
// TestVMProvisionUEFIRedfish boots its ramdisk with redfish-virtual-media:
// OVMF loads the virtual CD's El Torito EFI image (the IPA ISO's GRUB,
// re-mastered with the node's parameters).
// LabOptions.PartitionImage serves BuildPartitionImage's root file
// system (Debian packages with GRUB, no boot loader installed) for
// image_type partition: IPA partitions the disk and install_bootloader
// runs grub-install and grub-mkconfig in it.
//
// # Software RAID
//
// LabOptions.SoftwareRAID serves BuildRAIDOSImage's whole-disk images
// (the partition image's root file system as the first partition, BIOS
// on an MBR disk, UEFI on a GPT disk with an ESP whose GRUB finds the
// root on the md array) for RAIDInstanceInfo, and the lab's registry has
// the agent raid interface. The phases of e2e_raid_test.go run on a
// manageable node with its agent up: its raid interface set to agent,
// the target_raid_config Ironic documents (one RAID-1, size MAX,
// controller software), the root device hint removed (IPA then picks
// the md device), a manual clean of raid.delete_configuration,
// deploy.erase_devices_metadata and raid.create_configuration (both disk
// files then hold a member of one array), provide (cleaning keeps it),
// and the RAID image deployed onto the md device: install_bootloader,
// which the node's target_raid_config makes the direct interface ask
// for, puts GRUB on both disks (BIOS) or an ESP mirror with a boot entry
// per disk (UEFI), and the OS comes up from the array (GRUB names an
// md device, the OS's /init shows the RAID-1 in /proc/mdstat and its
// root on an md device, and reads its config drive from it).
// TestVMProvisionDualStack (BIOS) runs them after its inspection,
// TestVMProvisionUEFI at its end.
//
// One VM at a time on a 2-core machine: TCG costs a host core per vCPU.
package vmlab
