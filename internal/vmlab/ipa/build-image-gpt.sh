#!/usr/bin/env bash
# Builds the UEFI whole-disk OS image the virtual-machine lab deploys: a
# GPT disk whose one partition is an EFI System Partition (FAT) holding
# the kernel and initramfs of the MBR OS image (build-image.sh: the same
# /init, the same ANVIL-OS-MARKER line) and two GRUB EFI loaders built
# with grub-mkimage, each with an embedded configuration that says which
# one started and boots the kernel from the partition it was loaded from:
#   EFI/anvil/grubx64.efi  the installed loader, named by EFI/anvil/BOOTX64.CSV
#                          (label anvil-os): IPA's install_bootloader makes
#                          the firmware's boot entry for it with efibootmgr;
#   EFI/BOOT/BOOTX64.EFI   the removable-media fallback the firmware finds
#                          without any boot entry.
# The loader prints "anvil-grub: started <name>" on the console.
#
# usage: build-image-gpt.sh MBR_DISK_RAW OUT_DIR
# writes OUT_DIR/disk.raw and its .sha256/.sha512.
set -euo pipefail

mbr_disk=$1 out=$2
for tool in mcopy mmd mkfs.vfat sfdisk grub-mkimage iconv sha256sum sha512sum; do
  command -v "$tool" >/dev/null || { echo "build-image-gpt: $tool is missing" >&2; exit 3; }
done
[ -d /usr/lib/grub/x86_64-efi ] || { echo "build-image-gpt: /usr/lib/grub/x86_64-efi is missing (grub-efi-amd64-bin)" >&2; exit 3; }

work=$(mktemp -d "${TMPDIR:-/tmp}/anvil-gpt-image.XXXXXX")
trap 'rm -rf "$work"' EXIT

# The kernel and initramfs of the MBR image's FAT partition (from 1 MiB).
mcopy -i "$mbr_disk@@1048576" ::vmlinuz ::initrd "$work/"

loader() { # loader NAME OUT
  cat >"$work/$1.cfg" <<CFG
echo "anvil-grub: started $1"
linux /vmlinuz console=ttyS0,115200 panic=10
initrd /initrd
boot
CFG
  # No -p device: GRUB's root is the partition it was loaded from.
  grub-mkimage -O x86_64-efi -o "$2" -p /EFI -c "$work/$1.cfg" \
    part_gpt fat linux echo boot normal
}
loader installed-entry "$work/grubx64.efi"
loader removable-fallback "$work/BOOTX64.EFI"
# BOOTX64.CSV, as shim's fallback reads it: UTF-16 with a byte order
# mark, "loader,label,options,description".
{ printf '\xff\xfe'; printf 'grubx64.efi,anvil-os,,Anvil lab OS\n' | iconv -f utf-8 -t utf-16le; } >"$work/BOOTX64.CSV"

esp_mib=64
mkfs.vfat -n ANVILESP -C "$work/esp.img" $((esp_mib * 1024)) >/dev/null
mmd -i "$work/esp.img" ::EFI ::EFI/BOOT ::EFI/anvil
mcopy -i "$work/esp.img" "$work/vmlinuz" "$work/initrd" ::
mcopy -i "$work/esp.img" "$work/BOOTX64.EFI" ::EFI/BOOT/BOOTX64.EFI
mcopy -i "$work/esp.img" "$work/grubx64.efi" "$work/BOOTX64.CSV" ::EFI/anvil/

# A 96 MiB disk: the ESP from 1 MiB, the rest free for the config drive
# partition IPA adds at the end of the target disk.
truncate -s 96M "$out/disk.raw"
printf 'label: gpt\nstart=2048, size=%d, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name="EFI System Partition"\n' \
  $((esp_mib * 2048)) | sfdisk -q "$out/disk.raw"
dd if="$work/esp.img" of="$out/disk.raw" bs=1M seek=1 conv=notrunc status=none
(cd "$out" && sha256sum disk.raw | cut -d' ' -f1 >disk.raw.sha256 && sha512sum disk.raw | cut -d' ' -f1 >disk.raw.sha512)
echo "build-image-gpt: disk.raw $(du -h --apparent-size "$out/disk.raw" | cut -f1), ESP ${esp_mib} MiB"
