#!/bin/bash
# build-iso.sh: the IPA ramdisk as a bootable ISO 9660 image for virtual
# media: BIOS (El Torito no-emulation boot with ISOLINUX) and UEFI (an El
# Torito EFI entry: a FAT image holding GRUB as
# EFI/BOOT/BOOTX64.EFI, which reads the ISO's /boot/grub/grub.cfg). The
# kernel and initramfs are the network boot's; isolinux.cfg's append line
# and grub.cfg's linux line, which a re-master (the
# redfish-virtual-media boot interface) extends with the node's
# parameters, ipa-api-url among them, are the same.
#
# usage: build-iso.sh KERNEL INITRAMFS OUT_DIR
# writes OUT_DIR/ipa.iso. Deterministic: fixed file times, volume dates
# and order (SOURCE_DATE_EPOCH).
set -euo pipefail
kernel="$1" initramfs="$2" out="$3"
for tool in xorriso grub-mkimage mkfs.vfat mcopy mmd; do
  command -v "$tool" >/dev/null || { echo "build-iso: no $tool (Debian packages xorriso, grub-efi-amd64-bin, dosfstools, mtools)"; exit 3; }
done
[ -d /usr/lib/grub/x86_64-efi ] || { echo "build-iso: no /usr/lib/grub/x86_64-efi (Debian package grub-efi-amd64-bin)"; exit 3; }
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
# UEFI: GRUB finds the ISO by its kernel and reads the ISO's grub.cfg,
# whose linux line carries the same parameters as isolinux.cfg's.
mkdir -p "$tree/boot/grub"
cat >"$tree/boot/grub/grub.cfg" <<'CFG'
serial --unit=0 --speed=115200
terminal_input serial console
terminal_output serial console
set timeout=0
menuentry ipa {
  linux /vmlinuz console=ttyS0,115200 rootfstype=ramfs ipa-debug=1
  initrd /initrd.img
}
CFG
efi="$(mktemp -d "$out/efi.XXXXXX")"
trap 'rm -rf "$tree" "$efi"' EXIT
cat >"$efi/embedded.cfg" <<'CFG'
search --no-floppy --set=root --file /vmlinuz
set prefix=($root)/boot/grub
configfile ($root)/boot/grub/grub.cfg
CFG
# The modules are linked into GRUB's core image and the configuration
# embedded in it: no memdisk, so the same inputs give the same bytes.
grub-mkimage -O x86_64-efi -o "$efi/BOOTX64.EFI" -p /boot/grub -c "$efi/embedded.cfg" \
  part_gpt part_msdos iso9660 search search_fs_file configfile linux normal serial terminal echo test
# The FAT image: 4 MiB, fixed volume id and times.
dd if=/dev/zero of="$tree/efiboot.img" bs=1M count=4 status=none
mkfs.vfat -i 414e5649 -n ANVIL_EFI --invariant "$tree/efiboot.img" >/dev/null 2>&1 ||
  mkfs.vfat -i 414e5649 -n ANVIL_EFI "$tree/efiboot.img" >/dev/null
export MTOOLS_SKIP_CHECK=1 SOURCE_DATE_EPOCH=1700000000
mmd -i "$tree/efiboot.img" ::/EFI ::/EFI/BOOT
touch -h -d @1700000000 "$efi/BOOTX64.EFI"
mcopy -m -i "$tree/efiboot.img" "$efi/BOOTX64.EFI" ::/EFI/BOOT/BOOTX64.EFI
find "$tree" -exec touch -h -d @1700000000 {} +
export SOURCE_DATE_EPOCH=1700000000
xorriso -as mkisofs -quiet -o "$out/ipa.iso" -V ANVIL_IPA -R -J \
  -b isolinux/isolinux.bin -c isolinux/boot.cat -no-emul-boot -boot-load-size 4 -boot-info-table \
  -eltorito-alt-boot -e efiboot.img -no-emul-boot \
  "$tree"
echo "build-iso: $(du -h "$out/ipa.iso" | cut -f1)"
