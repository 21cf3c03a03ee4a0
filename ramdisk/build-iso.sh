#!/bin/bash
# build-iso.sh: the IPA ramdisk as a bootable ISO 9660 image for virtual
# media (BIOS, El Torito no-emulation boot with ISOLINUX): the kernel and
# initramfs the network boot uses, and an isolinux.cfg whose append line
# a re-master (the redfish-virtual-media boot interface) extends with the
# node's parameters, ipa-api-url among them.
#
# usage: build-iso.sh KERNEL INITRAMFS OUT_DIR
# writes OUT_DIR/ipa.iso. Deterministic: fixed file times, volume dates
# and order (SOURCE_DATE_EPOCH).
set -euo pipefail
kernel="$1" initramfs="$2" out="$3"
for tool in xorriso; do
  command -v "$tool" >/dev/null || { echo "build-iso: no $tool (Debian package xorriso)"; exit 3; }
done
isolinux=/usr/lib/ISOLINUX/isolinux.bin
ldlinux=/usr/lib/syslinux/modules/bios/ldlinux.c32
for f in "$isolinux" "$ldlinux"; do
  [ -r "$f" ] || { echo "build-iso: no $f (Debian packages isolinux, syslinux-common)"; exit 3; }
done
tree="$(mktemp -d "$out/tree.XXXXXX")"
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree/isolinux"
cp "$isolinux" "$ldlinux" "$tree/isolinux/"
cp "$kernel" "$tree/vmlinuz"
cp "$initramfs" "$tree/initrd.img"
# The serial console first: the lab reads the boot on ttyS0. rootfstype=
# ramfs: the 1 GiB machine's tmpfs root (half its memory) would truncate
# the unpacked initramfs.
cat >"$tree/isolinux/isolinux.cfg" <<'CFG'
serial 0 115200
default ipa
prompt 0
timeout 0
label ipa
  kernel /vmlinuz
  append initrd=/initrd.img console=ttyS0,115200 rootfstype=ramfs ipa-debug=1
CFG
find "$tree" -exec touch -h -d @1700000000 {} +
export SOURCE_DATE_EPOCH=1700000000
xorriso -as mkisofs -quiet -o "$out/ipa.iso" -V ANVIL_IPA -R -J \
  -b isolinux/isolinux.bin -c isolinux/boot.cat -no-emul-boot -boot-load-size 4 -boot-info-table \
  "$tree"
echo "build-iso: $(du -h "$out/ipa.iso" | cut -f1)"
