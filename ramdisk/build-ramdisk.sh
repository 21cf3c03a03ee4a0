#!/usr/bin/env bash
# Builds the stock Ironic Python Agent ramdisk from a root file system
# (build-root.sh's) and an IPA source tarball: IPA as an installed
# package with its entry points, byte-compiled with everything else, the
# kernel modules a machine needs from the given kernel package, and an
# /init that brings the first NIC up with DHCP (DHCPv4, DHCPv6 or both:
# anvil.dhcp=4, 6 or 4,6 on the kernel command line, else ipa-api-url's
# family) and runs the agent, which reads ipa-api-url= from the kernel
# command line. It is a rescue ramdisk too: once the agent's
# finalize_rescue wrote the rescue password's hash, /init creates the
# user "rescue" with it and runs a login on the serial console instead
# of the agent.
#
# usage: build-ramdisk.sh IPA_TARBALL KERNEL_DEB ROOT_TAR OUT_DIR
# writes OUT_DIR/initramfs (cpio newc, zstd).
# env: ANVIL_IPA_VERSION (default 9.4.3).
set -euo pipefail

ipa_tar=$1 kernel_deb=$2 root_tar=$3 out=$4

for tool in dpkg-deb cpio zstd python3 depmod tar; do
  command -v "$tool" >/dev/null || { echo "build-ramdisk: $tool is missing" >&2; exit 3; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/anvil-ipa-ramdisk.XXXXXX")
trap 'rm -rf "$work"' EXIT
root=$work/root
mkdir -p "$root"
zstd -q -dc "$root_tar" | tar -x -C "$root" --numeric-owner

# IPA as an installed package: its code, and a dist-info whose
# entry_points.txt has every [entry_points] group of its setup.cfg, so
# stevedore finds the hardware managers and extensions.
mkdir -p "$work/ipa"
tar -xzf "$ipa_tar" -C "$work/ipa"
# The tarball's top directory: ironic-python-agent (a git archive) or
# ironic-python-agent-<version> (PyPI's sdist).
src=$(find "$work/ipa" -maxdepth 2 -name setup.cfg -path '*/ironic-python-agent*/setup.cfg' -printf '%h\n' | head -n1)
[ -d "$src/ironic_python_agent" ] || { echo "build-ramdisk: no ironic_python_agent in $ipa_tar" >&2; exit 1; }
site=$root/usr/lib/python3/dist-packages
cp -a "$src/ironic_python_agent" "$site/"
version=${ANVIL_IPA_VERSION:-9.4.3}
info=$site/ironic_python_agent-$version.dist-info
mkdir -p "$info"
printf 'Metadata-Version: 2.1\nName: ironic-python-agent\nVersion: %s\n' "$version" >"$info/METADATA"
echo ironic_python_agent >"$info/top_level.txt"
python3 - "$src/setup.cfg" "$info/entry_points.txt" <<'PY'
import configparser, sys
cfg = configparser.ConfigParser(interpolation=None)
cfg.read(sys.argv[1])
with open(sys.argv[2], "w") as out:
    for group, body in cfg["entry_points"].items():
        out.write("[%s]\n" % group)
        for line in body.strip().splitlines():
            if line.strip():
                out.write(line.strip() + "\n")
        out.write("\n")
PY
grep -q '^\[ironic_python_agent.hardware_managers\]' "$info/entry_points.txt"

# The kernel modules a QEMU machine needs, with their dependencies.
mkdir -p "$work/kernel"
dpkg-deb -x "$kernel_deb" "$work/kernel"
kver=$(ls "$work/kernel/lib/modules" | head -n1)
# The package has no modules.dep (its postinst runs depmod).
depmod -b "$work/kernel" "$kver"
mods=(virtio_pci virtio_net virtio_blk virtio_scsi virtio_rng sd_mod sr_mod ata_piix ahci nvme
  ext4 vfat iso9660 squashfs loop isofs ipmi_si ipmi_devintf ipmi_ssif e1000 e1000e
  efivarfs md_mod raid0 raid1 raid10 nls_cp437 nls_utf8 nls_iso8859_1 nls_ascii)
for m in "${mods[@]}"; do
  modprobe --show-depends -d "$work/kernel" -S "$kver" "$m" 2>/dev/null || true
done | awk '$1 == "insmod" {print $2}' | sort -u | while read -r ko; do
  rel=${ko#"$work/kernel"}
  mkdir -p "$root$(dirname "$rel")"
  cp "$ko" "$root$rel"
done
for f in modules.order modules.builtin modules.builtin.modinfo; do
  [ -f "$work/kernel/lib/modules/$kver/$f" ] && cp "$work/kernel/lib/modules/$kver/$f" "$root/lib/modules/$kver/"
done
depmod -b "$root" "$kver"

# partprobe, then wait for udev to have processed the partitions it
# re-read: IPA reads a new partition's UUID from lsblk (udev's database)
# right after partprobe and "udevadm settle", which returns before udev
# has even read the kernel's events on a slow (TCG) machine, and then
# records an empty root UUID for a partition image. "udevadm trigger
# --settle" waits for its own events, which udev handles after those.
mkdir -p "$root/usr/local/sbin"
cat >"$root/usr/local/sbin/partprobe" <<'PARTPROBE'
#!/bin/sh
/usr/sbin/partprobe "$@" || exit $?
udevadm trigger --settle --subsystem-match=block --action=change >/dev/null 2>&1 || udevadm settle --timeout=60
exit 0
PARTPROBE
chmod 0755 "$root/usr/local/sbin/partprobe"

cat >"$root/init" <<'INIT'
#!/bin/sh
# PID 1 of the IPA ramdisk: mount the kernel file systems, load the
# drivers, bring the first NIC up with DHCP and run the agent (again, if
# it exits: PID 1 must not). poweroff, reboot and halt signal PID 1
# (USR2, TERM, USR1, as busybox's and sysvinit's init take them): it
# stops the agent, flushes the disks and powers the machine off,
# restarts or halts it. Each stage's line carries the seconds since the
# kernel started (/proc/uptime), so a boot can be timed from the console.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /run /tmp
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /run
# The kernel and this script share the serial console: only emergencies
# from the kernel from now on, so the lines below stay whole.
echo 1 >/proc/sys/kernel/printk
say() {
	read -r up _ </proc/uptime
	echo "anvil-ipa: $* (${up}s)" >/dev/console
}
say "init started"
agent=
down() {
	say "$1: stopping ironic-python-agent"
	[ -n "$agent" ] && kill -TERM "$agent" 2>/dev/null
	i=0
	while [ -n "$agent" ] && kill -0 "$agent" 2>/dev/null && [ $i -lt 50 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	sync
	say "$1"
	case $1 in
	poweroff) echo o >/proc/sysrq-trigger ;;
	reboot) echo b >/proc/sysrq-trigger ;;
	halt) echo 1 >/proc/sys/kernel/printk ;;
	esac
	while :; do sleep 60; done
}
trap 'down poweroff' USR2
trap 'down reboot' TERM
trap 'down halt' USR1
modprobe -a virtio_pci virtio_net virtio_blk virtio_scsi virtio_rng sd_mod sr_mod ahci nvme \
	ipmi_si ipmi_devintf 2>/dev/null
# UEFI: the firmware's variables, where efibootmgr (IPA's
# install_bootloader) reads and writes the boot entries.
if [ -d /sys/firmware/efi ]; then
	modprobe efivarfs 2>/dev/null
	mount -t efivarfs efivarfs /sys/firmware/efi/efivars && say "efivarfs mounted"
fi
/lib/systemd/systemd-udevd --daemon
udevadm trigger --action=add --subsystem-match=net
udevadm trigger --action=add --subsystem-nomatch=net
udevadm settle --timeout=60
say "devices settled"
ip link set lo up
nic=""
for d in /sys/class/net/*; do
	n=${d##*/}
	[ "$n" = lo ] && continue
	[ -e "$d/device" ] && { nic=$n; break; }
done
say "network $nic"
ip link set "$nic" up
# The address families to configure: anvil.dhcp=4, 6 or 4,6 on the
# kernel command line; without it, ipa-api-url's: DHCPv6 for an IPv6
# literal (http://[fd00::1]:6385), DHCPv4 otherwise.
dhcp= api6=
for w in $(cat /proc/cmdline); do
	case $w in
	anvil.dhcp=*) dhcp=${w#anvil.dhcp=} ;;
	ipa-api-url=*://\[*) api6=1 ;;
	esac
done
if [ -z "$dhcp" ]; then
	dhcp=4
	[ -n "$api6" ] && dhcp=6
fi
case ",$dhcp," in
*,4,*)
	until dhclient -1 -4 "$nic" >/dev/console 2>&1; do
		say "DHCP on $nic failed, retrying"
		sleep 2
	done
	say "DHCPv4 done"
	;;
esac
# waitaddr SCOPE: wait (10 s at most) until the NIC has an IPv6 address
# of SCOPE that duplicate address detection has passed: dhclient -6
# binds the link-local one, and the agent's address is the leased one.
waitaddr() {
	i=0
	while [ $i -lt 100 ]; do
		ip -6 -o addr show dev "$nic" scope "$1" | grep -v tentative | grep -q inet6 && return 0
		sleep 0.1
		i=$((i + 1))
	done
	return 1
}
case ",$dhcp," in
*,6,*)
	waitaddr link || say "no link-local address on $nic"
	# Stateful DHCPv6 (the router advertisement's managed flag); a
	# link-layer DUID carries the MAC. Debian's dhclient-script adds the
	# leased address as a /128: the route to the servers is the
	# advertisement's on-link prefix, which the kernel takes.
	until dhclient -1 -6 -D LL "$nic" >/dev/console 2>&1; do
		say "DHCPv6 on $nic failed, retrying"
		sleep 2
	done
	waitaddr global || say "the DHCPv6 address on $nic is still tentative"
	say "DHCPv6 done"
	;;
esac
say "network up: $(ip -o addr show dev "$nic" scope global | awk '{print $4}' | tr '\n' ' ')"
hostname ipa-ramdisk
# rescue does what the rescue parts of IPA's DIB element do once
# finalize_rescue wrote the hash: the user "rescue" with that password
# (in the sudo group, as there), DHCP on every NIC, and here a login
# on the serial console (agetty, respawned), where a rescue is used
# when the network is not. It never returns: PID 1 keeps its traps.
rescue() {
	touch /etc/.rescued
	if ! id rescue >/dev/null 2>&1; then
		groups=
		getent group sudo >/dev/null && groups="-G sudo"
		# shellcheck disable=SC2086
		useradd -m -s /bin/bash $groups -p "$(cat /etc/ipa-rescue-config/ipa-rescue-password)" rescue
	fi
	say "rescue: user rescue created; login on the serial console"
	for d in /sys/class/net/*; do
		n=${d##*/}
		[ "$n" = lo ] || [ "$n" = "$nic" ] || [ ! -e "$d/device" ] && continue
		ip link set "$n" up
		dhclient -nw -4 "$n" >/dev/null 2>&1
	done
	tty=$(sed -n 's/.*console=\(tty[A-Za-z0-9]*\).*/\1/p' /proc/cmdline)
	(
		while :; do
			setsid -w agetty -L -8 115200 "${tty:-ttyS0}" vt100
			sleep 1
		done
	) &
	while :; do
		sleep 60 &
		wait $!
	done
}
while :; do
	say "starting ironic-python-agent"
	python3 -c "import sys; sys.argv[0] = 'ironic-python-agent'; from ironic_python_agent.cmd import agent; agent.run()" >/dev/console 2>&1 &
	agent=$!
	# wait returns early when a trapped signal comes; the trap runs then.
	while kill -0 "$agent" 2>/dev/null; do
		wait "$agent"
		rc=$?
	done
	agent=
	say "ironic-python-agent exited ($rc)"
	# Rescue: the agent's finalize_rescue wrote the rescue password's
	# crypt hash and stopped serving; it must not start again (IPA's
	# unit: ConditionPathExists=!/etc/.rescued).
	[ -s /etc/ipa-rescue-config/ipa-rescue-password ] && rescue
	sleep 5
done
INIT
chmod 0755 "$root/init"

# poweroff, reboot and halt, as IPA's standby.power_off and reboot run
# them: ask init (PID 1) to stop the agent, flush the disks and power
# off, restart or halt; with -f, at once.
cat >"$root/sbin/poweroff" <<'SHUTDOWN'
#!/bin/sh
case ${0##*/} in
poweroff) sig=USR2 key=o ;;
reboot) sig=TERM key=b ;;
halt) sig=USR1 key= ;;
*) echo "${0##*/}: call me poweroff, reboot or halt" >&2; exit 2 ;;
esac
case $1 in
-f | --force)
	sync
	[ -n "$key" ] && echo "$key" >/proc/sysrq-trigger
	exit 0
	;;
esac
kill -"$sig" 1
SHUTDOWN
chmod 0755 "$root/sbin/poweroff"
ln -sf poweroff "$root/sbin/reboot"
ln -sf poweroff "$root/sbin/halt"

# IPA looks for its configuration file and writes under these; its
# finalize_rescue writes the rescue password's hash into
# /etc/ipa-rescue-config (the directory must exist, as DIB makes it).
mkdir -p "$root/etc/ironic-python-agent" "$root/var/log" "$root/var/lib/dhcp" "$root/etc/ipa-rescue-config"
echo ipa-ramdisk >"$root/etc/hostname"
: >"$root/etc/resolv.conf"

# ipmitool reads IANA's whole list of private enterprise numbers (4.7 MB
# of text) at every start, to name a BMC's manufacturer; IPA runs it up
# to 33 times before its first lookup (a BMC's address and MAC on
# channels 1 to 11, its IPv6 settings), seconds each under TCG. The list
# keeps its header and the manufacturers of servers' BMCs.
pen=$root/usr/share/misc/enterprise-numbers.txt
if [ -f "$pen" ]; then
  awk -v keep=" 2 11 42 232 343 674 2011 3183 4413 5771 7154 7244 8743 10368 10437 10876 11129 19046 20301 25506 27500 28458 37945 40092 47196 49622 51987 " '
    /^[0-9]+$/ { rec = (index(keep, " " $1 " ") > 0); started = 1 }
    !started || rec { print }
  ' "$pen" >"$pen.new"
  mv "$pen.new" "$pen"
fi

# Byte code compiled now, not by every boot: without it the agent's
# first start spends most of its time compiling IPA, oslo, eventlet and
# the standard library under TCG. Hash-based and unchecked: the files
# are the same whatever their times, and Python does not read the
# sources to trust them.
find "$root" -name '__pycache__' -type d -prune -exec rm -rf {} + 2>/dev/null || true
pyver=$(chroot "$root" python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
# The standard library's test data holds files that do not compile on
# purpose; everything else must.
chroot "$root" python3 -m compileall -q -j 0 --invalidation-mode unchecked-hash -x '/tests?/' \
	"/usr/lib/python$pyver" /usr/lib/python3/dist-packages >"$work/compileall.log" 2>&1 || {
	tail -n 20 "$work/compileall.log" >&2
	exit 1
}

# Deterministic archive order; owner root.
(cd "$root" && find . -mindepth 1 -printf '%P\n' | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) |
  zstd -q -10 -T0 -o "$out/initramfs"
echo "build-ramdisk: initramfs $(du -h "$out/initramfs" | cut -f1), kernel $kver"
