#!/usr/bin/env bash
# Builds the stock Ironic Python Agent ramdisk from Debian 12 packages and
# an IPA source tarball: a root file system from debootstrap (minbase plus
# IPA's Python dependencies and the tools its GenericHardwareManager
# calls), IPA itself as an installed package with its entry points, the
# kernel modules a QEMU machine needs from the given kernel package, and
# an /init that brings the first NIC up with DHCP and runs the agent,
# which reads ipa-api-url= from the kernel command line.
#
# usage: build-ramdisk.sh IPA_TARBALL KERNEL_DEB OUT_DIR
# writes OUT_DIR/initramfs (cpio newc, zstd) and OUT_DIR/packages (the
# Debian packages and versions in the root).
# env: ANVIL_DEBIAN_MIRROR (default http://deb.debian.org/debian),
#      ANVIL_DEBIAN_SUITE (default bookworm).
set -euo pipefail

ipa_tar=$1 kernel_deb=$2 out=$3
mirror=${ANVIL_DEBIAN_MIRROR:-http://deb.debian.org/debian}
suite=${ANVIL_DEBIAN_SUITE:-bookworm}

for tool in debootstrap dpkg-deb cpio zstd python3 depmod; do
  command -v "$tool" >/dev/null || { echo "build-ramdisk: $tool is missing" >&2; exit 3; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/anvil-ipa-ramdisk.XXXXXX")
# debootstrap mounts proc and sys in the root while it installs; a build
# stopped then (a timeout) leaves them mounted. Unmount what is left, and
# never remove across a mount point.
cleanup() {
  local m
  for m in "$work/root/proc" "$work/root/sys" "$work/root/dev/pts" "$work/root/dev"; do
    mountpoint -q "$m" 2>/dev/null && umount -l "$m" 2>/dev/null
  done
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT
root=$work/root

# IPA's Python dependencies (Debian 12's, see the peers README), the
# virtual package debootstrap cannot resolve (python3-cffi-backend), and
# the programs IPA runs for inventory, cleaning and image writing
# (fuser from psmisc before erasing a disk's metadata, hexdump from
# bsdextrautils for a disk's identifier, file for image types).
pkgs=(
  python3 python3-eventlet python3-netifaces python3-oslo.config python3-oslo.concurrency
  python3-oslo.log python3-oslo.service python3-oslo.utils python3-oslo.serialization
  python3-pint python3-psutil python3-pyudev python3-stevedore python3-tenacity
  python3-ironic-lib python3-werkzeug python3-cryptography python3-tooz python3-requests
  python3-pbr python3-zeroconf python3-cffi-backend
  isc-dhcp-client iproute2 kmod udev ca-certificates util-linux dmidecode lshw parted gdisk
  qemu-utils efibootmgr hdparm ipmitool mdadm pciutils dosfstools e2fsprogs xfsprogs
  psmisc bsdextrautils file
)
include=$(IFS=,; echo "${pkgs[*]}")
echo "build-ramdisk: debootstrap $suite (minbase + ${#pkgs[@]} packages)"
debootstrap --variant=minbase --include="$include" "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 || {
  tail -n 30 "$work/debootstrap.log" >&2
  exit 1
}
chroot "$root" dpkg-query -W -f='${Package} ${Version}\n' | sort >"$out/packages"

# IPA as an installed package: its code, and a dist-info whose
# entry_points.txt has every [entry_points] group of its setup.cfg, so
# stevedore finds the hardware managers and extensions.
mkdir -p "$work/ipa"
tar -xzf "$ipa_tar" -C "$work/ipa"
src=$(find "$work/ipa" -maxdepth 2 -name setup.cfg -path '*/ironic-python-agent/*' -printf '%h\n' | head -n1)
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
  ext4 vfat iso9660 squashfs loop isofs ipmi_si ipmi_devintf ipmi_ssif e1000 e1000e)
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

cat >"$root/init" <<'INIT'
#!/bin/sh
# PID 1 of the IPA ramdisk: mount the kernel file systems, load the
# drivers, bring the first NIC up with DHCP, run the agent (again, if it
# exits: PID 1 must not).
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /run /tmp
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /run
echo "anvil-ipa: init started" >/dev/console
for m in virtio_pci virtio_net virtio_blk virtio_scsi virtio_rng sd_mod sr_mod ahci nvme ipmi_si ipmi_devintf; do
  modprobe "$m" 2>/dev/null
done
/lib/systemd/systemd-udevd --daemon
udevadm trigger --action=add
udevadm settle --timeout=60
ip link set lo up
nic=""
for d in /sys/class/net/*; do
  n=${d##*/}
  [ "$n" = lo ] && continue
  [ -e "$d/device" ] && { nic=$n; break; }
done
echo "anvil-ipa: network $nic" >/dev/console
ip link set "$nic" up
until dhclient -1 -4 "$nic" >/dev/console 2>&1; do
  echo "anvil-ipa: DHCP on $nic failed, retrying" >/dev/console
  sleep 2
done
echo "anvil-ipa: network up: $(ip -4 -o addr show dev "$nic" | awk '{print $4}')" >/dev/console
hostname ipa-ramdisk
while :; do
  echo "anvil-ipa: starting ironic-python-agent" >/dev/console
  python3 -c "import sys; sys.argv[0] = 'ironic-python-agent'; from ironic_python_agent.cmd import agent; agent.run()" >/dev/console 2>&1
  echo "anvil-ipa: ironic-python-agent exited ($?)" >/dev/console
  sleep 5
done
INIT
chmod 0755 "$root/init"

# IPA looks for its configuration file and writes under these.
mkdir -p "$root/etc/ironic-python-agent" "$root/var/log" "$root/var/lib/dhcp"
echo ipa-ramdisk >"$root/etc/hostname"
: >"$root/etc/resolv.conf"

# What a ramdisk does not need.
rm -rf "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* \
  "$root"/usr/share/locale/* "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin \
  "$root"/var/cache/apt/archives/*.deb "$root"/usr/share/i18n/* "$root"/usr/share/zoneinfo-* 2>/dev/null || true
find "$root" -name '__pycache__' -type d -prune -exec rm -rf {} + 2>/dev/null || true

# Deterministic archive order; owner root.
(cd "$root" && find . -mindepth 1 -printf '%P\n' | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) |
  zstd -q -10 -T0 -o "$out/initramfs"
echo "build-ramdisk: initramfs $(du -h "$out/initramfs" | cut -f1), kernel $kver"
