#!/usr/bin/env bash
# Builds the small whole-disk OS image the virtual-machine lab deploys: an
# MBR disk with one bootable FAT partition holding SYSLINUX, a Debian
# kernel and a busybox initramfs whose /init finds the config drive IPA
# writes (label config-2), reads the hostname from
# openstack/latest/meta_data.json and the "anvil-marker:" line of
# openstack/latest/user_data, and prints
#   ANVIL-OS-MARKER hostname=<hostname> user-data=<value>
# on the serial console, again every 10 s, keeping the machine up.
# Before that it prints the root= of its command line and the device
# holding it, and, when the initramfs has /sbin/mdadm (the partition
# image adds it), assembles the software RAID arrays on the disks and
# prints /proc/mdstat, as a distribution's initramfs assembles them:
#   anvil-os: mdstat: md127 : active raid1 vdb1[1] vda1[0]
#   anvil-os: root UUID=<uuid> is /dev/md127p1
#
# usage: build-image.sh KERNEL_DEB BUSYBOX OUT_DIR
# writes OUT_DIR/disk.raw, OUT_DIR/disk.qcow2 and their .sha256/.sha512.
set -euo pipefail

kernel_deb=$1 busybox=$2 out=$3
for tool in xz dpkg-deb cpio gzip sfdisk mkfs.vfat mcopy syslinux qemu-img depmod; do
  command -v "$tool" >/dev/null || { echo "build-image: $tool is missing" >&2; exit 3; }
done
mbr=/usr/lib/syslinux/mbr/mbr.bin
[ -f "$mbr" ] || { echo "build-image: $mbr is missing (syslinux-common)" >&2; exit 3; }

work=$(mktemp -d "${TMPDIR:-/tmp}/anvil-os-image.XXXXXX")
trap 'rm -rf "$work"' EXIT

mkdir -p "$work/kernel"
dpkg-deb -x "$kernel_deb" "$work/kernel"
kver=$(ls "$work/kernel/lib/modules" | head -n1)
# The package has no modules.dep (its postinst runs depmod).
depmod -b "$work/kernel" "$kver"
cp "$work/kernel/boot/vmlinuz-$kver" "$work/vmlinuz"

# The initramfs: static busybox, the block and file-system modules the
# config drive needs, and /init.
root=$work/root
mkdir -p "$root/bin" "$root/dev" "$root/proc" "$root/sys" "$root/mnt" "$root/tmp"
cp "$busybox" "$root/bin/busybox"
for a in sh mount umount mkdir cat sed grep head findfs blkid modprobe insmod sleep echo ls tr; do
  ln -s busybox "$root/bin/$a"
done
for m in virtio_pci virtio_blk virtio_scsi sd_mod ata_piix ahci isofs vfat nls_cp437 nls_iso8859_1 md_mod raid1; do
  modprobe --show-depends -d "$work/kernel" -S "$kver" "$m" 2>/dev/null || true
done | awk '$1 == "insmod" {print $2}' | awk '!seen[$0]++' >"$work/modules"
mkdir -p "$root/modules"
: >"$root/modules/order"
# busybox's insmod loads plain modules only: Debian's are xz-compressed.
while read -r ko; do
  name=$(basename "$ko" .xz)
  case "$ko" in
    *.xz) xz -dc "$ko" >"$root/modules/$name" ;;
    *) cp "$ko" "$root/modules/$name" ;;
  esac
  echo "$name" >>"$root/modules/order"
done <"$work/modules"
cat >"$root/init" <<'INIT'
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
echo "anvil-os: booted from disk"
while read -r ko; do
  insmod "/modules/$ko" 2>/dev/null
done </modules/order
# Software RAID (md): the arrays on the disks, assembled by mdadm where
# the initramfs has it; the config drive may be on one.
if [ -x /sbin/mdadm ]; then
  mkdir -p /run /etc/mdadm
  sleep 1 # the disks' partitions
  /sbin/mdadm --assemble --scan 2>&1 | sed 's/^/anvil-os: mdadm: /'
  grep -v '^[[:space:]]*$' /proc/mdstat | sed 's/^/anvil-os: mdstat: /'
fi
root=$(tr ' ' '\n' </proc/cmdline | sed -n 's/^root=//p' | head -n1)
if [ -n "$root" ]; then
  echo "anvil-os: root $root is $(findfs "$root" 2>/dev/null || echo nowhere)"
fi
host=""
data=""
for i in $(seq 1 30); do
  dev=$(findfs LABEL=config-2 2>/dev/null)
  [ -n "$dev" ] && break
  sleep 1
done
if [ -n "$dev" ] && mount -o ro "$dev" /mnt 2>/dev/null; then
  meta=/mnt/openstack/latest/meta_data.json
  [ -f "$meta" ] && host=$(sed -n 's/.*"hostname"[[:space:]]*:[[:space:]]*"\([^"]*\)".*/\1/p' "$meta" | head -n1)
  ud=/mnt/openstack/latest/user_data
  [ -f "$ud" ] && data=$(sed -n 's/^anvil-marker:[[:space:]]*//p' "$ud" | head -n1 | tr -cd 'A-Za-z0-9._-')
  umount /mnt
else
  echo "anvil-os: no config drive (label config-2); block devices: $(ls /sys/class/block | tr '\n' ' ')"
  blkid
fi
# Again every 10 s: a serial console attached later (SOL) reads it too.
while :; do
  echo "ANVIL-OS-MARKER hostname=${host:-none} user-data=${data:-none}"
  sleep 10
done
INIT
chmod 0755 "$root/init"
(cd "$root" && find . -mindepth 1 -printf '%P\n' | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) | gzip -9 -n >"$work/initrd"

cat >"$work/syslinux.cfg" <<'CFG'
SERIAL 0 115200
DEFAULT os
PROMPT 0
TIMEOUT 1
LABEL os
  KERNEL vmlinuz
  INITRD initrd
  APPEND console=ttyS0,115200 panic=10
CFG

# A 96 MiB disk: the FAT partition from 1 MiB, the rest free for the
# config drive partition IPA adds at the end of the target disk.
part_mib=80
mkfs.vfat -n ANVILOS -C "$work/part.img" $((part_mib * 1024)) >/dev/null
mcopy -i "$work/part.img" "$work/vmlinuz" "$work/initrd" "$work/syslinux.cfg" ::
syslinux --install "$work/part.img"
truncate -s 96M "$out/disk.raw"
printf 'label: dos\nstart=2048, size=%d, type=c, bootable\n' $((part_mib * 2048)) | sfdisk -q "$out/disk.raw"
dd if="$work/part.img" of="$out/disk.raw" bs=1M seek=1 conv=notrunc status=none
dd if="$mbr" of="$out/disk.raw" bs=440 count=1 conv=notrunc status=none
qemu-img convert -f raw -O qcow2 "$out/disk.raw" "$out/disk.qcow2"
for f in disk.raw disk.qcow2; do
  (cd "$out" && sha256sum "$f" | cut -d' ' -f1 >"$f.sha256" && sha512sum "$f" | cut -d' ' -f1 >"$f.sha512")
done
echo "build-image: disk.raw $(du -h --apparent-size "$out/disk.raw" | cut -f1), disk.qcow2 $(du -h "$out/disk.qcow2" | cut -f1), kernel $kver"
