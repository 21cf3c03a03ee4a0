#!/usr/bin/env bash
# Builds the partition image the virtual-machine lab deploys with
# image_type partition: an ext4 root file system of Debian packages
# (debootstrap minbase with GRUB for BIOS and UEFI, grub2-common's
# grub-install and grub-mkconfig, efibootmgr, mdadm) holding
# /boot/vmlinuz-KVER and /boot/initrd.img-KVER, the kernel and initramfs
# of the MBR OS image (build-image.sh: its /init prints the
# ANVIL-OS-MARKER line) with mdadm and the libraries it links appended
# (a second cpio archive), so that the /init assembles software RAID
# arrays as Ironic requires of an image deployed onto one, and an
# /etc/default/grub for the serial console. It has no boot loader of its
# own: IPA's install_bootloader runs grub-install and grub-mkconfig in it
# (chroot), and GRUB's menu entry, made by grub-mkconfig, boots that
# kernel; /etc/grub.d/01_anvil makes grub.cfg print where GRUB read it
# from ("anvil-grub: grub.cfg from <prefix>", an md array's prefix names
# mduuid/...). GRUB_DISTRIBUTOR names the image in GRUB's menu and in its
# EFI directory. build-image-raid.sh makes whole-disk images of this
# root file system for software RAID.
#
# usage: build-image-partition.sh KERNEL_DEB MBR_DISK_RAW OUT_DIR
# writes OUT_DIR/root.qcow2, OUT_DIR/root.qcow2.sha256 and .sha512, and
# OUT_DIR/packages.
# env: ANVIL_DEBIAN_MIRROR (default http://deb.debian.org/debian),
#      ANVIL_DEBIAN_SUITE (default bookworm).
set -euo pipefail

kernel_deb=$1 mbr_disk=$2 out=$3
mirror=${ANVIL_DEBIAN_MIRROR:-http://deb.debian.org/debian}
suite=${ANVIL_DEBIAN_SUITE:-bookworm}
for tool in debootstrap dpkg-deb mcopy mkfs.ext4 qemu-img sha256sum sha512sum; do
  command -v "$tool" >/dev/null || { echo "build-image-partition: $tool is missing" >&2; exit 3; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/anvil-part-image.XXXXXX")
trap 'rm -rf "$work"' EXIT
root=$work/root

debootstrap --variant=minbase --include=grub-pc-bin,grub-efi-amd64-bin,grub2-common,efibootmgr,mdadm \
  "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 || {
  tail -n 30 "$work/debootstrap.log" >&2
  exit 1
}
chroot "$root" dpkg-query -W -f='${Package} ${Version}\n' | sort >"$out/packages"
rm -rf "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* \
  "$root"/usr/share/locale/* "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin \
  "$root"/var/cache/apt/archives/*.deb

mkdir -p "$work/kernel"
dpkg-deb -x "$kernel_deb" "$work/kernel"
kver=$(ls "$work/kernel/lib/modules" | head -n1)
cp "$work/kernel/boot/vmlinuz-$kver" "$root/boot/vmlinuz-$kver"
mcopy -i "$mbr_disk@@1048576" ::initrd "$root/boot/initrd.img-$kver"
# mdadm and what it links, from this root, appended to the initramfs as
# a second archive (the kernel unpacks each in turn).
md=$work/mdadm
mkdir -p "$md/sbin"
cp "$root/usr/sbin/mdadm" "$md/sbin/mdadm"
for lib in $(chroot "$root" ldd /usr/sbin/mdadm | awk '$2 == "=>" {print $3} $1 ~ /^\// {print $1}'); do
  mkdir -p "$md$(dirname "$lib")"
  cp -L "$root$lib" "$md$lib"
done
[ -n "$(ls "$md/lib64" 2>/dev/null)" ] || { echo "build-image-partition: no dynamic loader for mdadm" >&2; exit 1; }
(cd "$md" && find . -mindepth 1 -printf '%P\n' | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) | gzip -9 -n >>"$root/boot/initrd.img-$kver"

# grub.cfg says where GRUB read it from, before its menu.
cat >"$root/etc/grub.d/01_anvil" <<'SCRIPT'
#!/bin/sh
cat <<'CFG'
echo "anvil-grub: grub.cfg from $prefix"
CFG
SCRIPT
chmod 0755 "$root/etc/grub.d/01_anvil"

cat >"$root/etc/default/grub" <<'GRUB'
GRUB_DEFAULT=0
GRUB_TIMEOUT=1
GRUB_DISTRIBUTOR=anvil-partition
GRUB_CMDLINE_LINUX_DEFAULT=""
GRUB_CMDLINE_LINUX="console=ttyS0,115200 panic=10"
GRUB_TERMINAL="serial console"
GRUB_SERIAL_COMMAND="serial --unit=0 --speed=115200"
GRUB_DISABLE_OS_PROBER=true
GRUB_DISABLE_RECOVERY=true
GRUB
echo anvil-partition >"$root/etc/hostname"
: >"$root/etc/fstab"

# The file system: its content plus 64 MiB, in a qcow2 (IPA converts it
# to raw while writing the root partition).
size_mib=$(( $(du -sm "$root" | cut -f1) + 64 ))
mkfs.ext4 -q -L anvil-root -d "$root" "$work/root.raw" "${size_mib}M"
qemu-img convert -f raw -O qcow2 "$work/root.raw" "$out/root.qcow2"
(cd "$out" && sha256sum root.qcow2 | cut -d' ' -f1 >root.qcow2.sha256 && sha512sum root.qcow2 | cut -d' ' -f1 >root.qcow2.sha512)
echo "build-image-partition: root file system ${size_mib} MiB, root.qcow2 $(du -h "$out/root.qcow2" | cut -f1), kernel $kver"
