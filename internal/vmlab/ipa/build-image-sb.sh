#!/usr/bin/env bash
# Builds the secure boot whole-disk OS image the virtual-machine lab
# deploys: a GPT disk whose one partition is an EFI System Partition
# (FAT) holding the kernel and initramfs of the MBR OS image
# (build-image.sh: Debian's signed kernel, the same /init and
# ANVIL-OS-MARKER line) and Debian's signed boot chain, laid out as a
# Debian installation lays it out:
#   EFI/debian/shimx64.efi   shim signed by Microsoft (shim-signed), the
#                            loader BOOTX64.CSV names (label anvil-os):
#                            IPA's install_bootloader makes the firmware's
#                            boot entry for it with efibootmgr;
#   EFI/debian/grubx64.efi   GRUB signed by Debian (grub-efi-amd64-signed),
#                            which shim loads from beside itself and
#                            trusts; its prefix is /EFI/debian;
#   EFI/debian/grub.cfg      the configuration that GRUB reads wherever it
#                            was loaded from: it prints "anvil-grub:
#                            started installed-entry" (or
#                            "removable-fallback" when GRUB was loaded
#                            from EFI/BOOT) with that directory, and boots
#                            the kernel (which GRUB has shim verify);
#   EFI/BOOT/BOOTX64.EFI     the same shim as the removable-media fallback
#                            the firmware finds without a boot entry, with
#                            the same GRUB beside it (no fbx64.efi: shim
#                            goes straight to GRUB).
# Nothing on the partition is unsigned but the initramfs and grub.cfg,
# which shim does not verify.
#
# usage: build-image-sb.sh MBR_DISK_RAW SHIM SIGNED_GRUB OUT_DIR
# writes OUT_DIR/disk.raw and its .sha256/.sha512.
set -euo pipefail

mbr_disk=$1 shim=$2 grub=$3 out=$4
for tool in mcopy mmd mkfs.vfat sfdisk iconv sha256sum sha512sum; do
  command -v "$tool" >/dev/null || { echo "build-image-sb: $tool is missing" >&2; exit 3; }
done
for f in "$shim" "$grub"; do
  [ -f "$f" ] || { echo "build-image-sb: $f is missing (shim-signed, grub-efi-amd64-signed)" >&2; exit 3; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/anvil-sb-image.XXXXXX")
trap 'rm -rf "$work"' EXIT

# The kernel and initramfs of the MBR image's FAT partition (from 1 MiB).
mcopy -i "$mbr_disk@@1048576" ::vmlinuz ::initrd "$work/"

label=ANVILSBESP
# GRUB's root is set by the partition's label: Debian's signed GRUB may
# start with its root elsewhere than the partition it was loaded from.
# The loader's line stays within GRUB's 80 columns (it wraps longer ones).
cat >"$work/grub.cfg" <<CFG
if regexp '/EFI/BOOT\$' "\$cmdpath"; then
  set anvil_loader=removable-fallback
else
  set anvil_loader=installed-entry
fi
echo "anvil-grub: started \$anvil_loader from \$cmdpath"
search --no-floppy --set=root --label $label
linux /vmlinuz console=ttyS0,115200 panic=10
initrd /initrd
boot
CFG
# BOOTX64.CSV, as shim's fallback and IPA read it: UTF-16 with a byte
# order mark, "loader,label,options,description".
{ printf '\xff\xfe'; printf 'shimx64.efi,anvil-os,,Anvil lab OS (secure boot)\n' | iconv -f utf-8 -t utf-16le; } >"$work/BOOTX64.CSV"
cp "$shim" "$work/shimx64.efi"
cp "$grub" "$work/grubx64.efi"

esp_mib=64
mkfs.vfat -n "$label" -C "$work/esp.img" $((esp_mib * 1024)) >/dev/null
mmd -i "$work/esp.img" ::EFI ::EFI/debian ::EFI/BOOT
mcopy -i "$work/esp.img" "$work/vmlinuz" "$work/initrd" ::
mcopy -i "$work/esp.img" "$work/shimx64.efi" "$work/grubx64.efi" "$work/grub.cfg" "$work/BOOTX64.CSV" ::EFI/debian/
mcopy -i "$work/esp.img" "$work/shimx64.efi" ::EFI/BOOT/BOOTX64.EFI
mcopy -i "$work/esp.img" "$work/grubx64.efi" ::EFI/BOOT/grubx64.efi

# A 96 MiB disk: the ESP from 1 MiB, the rest free for the config drive
# partition IPA adds at the end of the target disk.
truncate -s 96M "$out/disk.raw"
printf 'label: gpt\nstart=2048, size=%d, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name="EFI System Partition"\n' \
  $((esp_mib * 2048)) | sfdisk -q "$out/disk.raw"
dd if="$work/esp.img" of="$out/disk.raw" bs=1M seek=1 conv=notrunc status=none
(cd "$out" && sha256sum disk.raw | cut -d' ' -f1 >disk.raw.sha256 && sha512sum disk.raw | cut -d' ' -f1 >disk.raw.sha512)
echo "build-image-sb: disk.raw $(du -h --apparent-size "$out/disk.raw" | cut -f1), ESP ${esp_mib} MiB, shim and GRUB signed"
