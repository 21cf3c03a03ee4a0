#!/usr/bin/env bash
# Builds the whole-disk images the virtual-machine lab deploys onto a
# software RAID (an md device IPA's raid.create_configuration made), from
# the partition image's root file system (build-image-partition.sh: GRUB
# for BIOS and UEFI, mdadm, the OS image's kernel, an initramfs with
# mdadm that assembles the arrays and prints the OS marker). As Ironic
# requires of such images, the root file system is the first partition:
#   raid-bios  an MBR disk (a fixed, non-zero disk identifier, which IPA
#              reports as the image's "root uuid") whose partition 1 is
#              the root file system. It has no boot code: IPA's
#              install_bootloader mounts the md device's first partition
#              and runs grub-install on each holder disk and grub-mkconfig
#              in it.
#   raid-uefi  a GPT disk whose partition 1 is the root file system and
#              partition 2 an EFI System Partition with two GRUB loaders
#              built with grub-mkimage: EFI/anvil/grubx64.efi, named by
#              EFI/anvil/BOOTX64.CSV (label anvil-raid), and the
#              removable-media fallback EFI/BOOT/BOOTX64.EFI. Each says
#              which it is, finds the root file system by its UUID (through
#              GRUB's mdraid1x: on the md array), says where, and boots the
#              root's kernel and initramfs:
#                anvil-grub: started <name>
#                anvil-grub: root (md/<array name>,gpt1)
#              IPA's install_bootloader (efibootmgr) moves that ESP onto
#              the ESP mirror it makes on the holder disks and adds a boot
#              entry for each holder's copy.
#
# usage: build-image-raid.sh ROOT_QCOW2 KVER OUT_DIR
# writes OUT_DIR/raid-bios.qcow2 and OUT_DIR/raid-uefi.qcow2 with their
# .sha256/.sha512, and OUT_DIR/rootfs-uuid (the root file system's UUID).
set -euo pipefail

root_qcow2=$1 kver=$2 out=$3
for tool in qemu-img blkid sfdisk mkfs.vfat mmd mcopy grub-mkimage iconv sha256sum sha512sum; do
  command -v "$tool" >/dev/null || { echo "build-image-raid: $tool is missing" >&2; exit 3; }
done
[ -d /usr/lib/grub/x86_64-efi ] || { echo "build-image-raid: /usr/lib/grub/x86_64-efi is missing (grub-efi-amd64-bin)" >&2; exit 3; }

work=$(mktemp -d "${TMPDIR:-/tmp}/anvil-raid-image.XXXXXX")
trap 'rm -rf "$work"' EXIT

qemu-img convert -f qcow2 -O raw "$root_qcow2" "$work/root.raw"
uuid=$(blkid -p -s UUID -o value "$work/root.raw")
[ -n "$uuid" ] || { echo "build-image-raid: the root file system has no UUID" >&2; exit 1; }
root_mib=$(( ($(stat -c %s "$work/root.raw") + 1048575) / 1048576 ))

# BIOS: partition 1 from 1 MiB, the root file system.
truncate -s $((root_mib + 2))M "$work/bios.raw"
printf 'label: dos\nlabel-id: 0x616e7672\nstart=2048, size=%d, type=83\n' $((root_mib * 2048)) | sfdisk -q "$work/bios.raw"
dd if="$work/root.raw" of="$work/bios.raw" bs=1M seek=1 conv=notrunc status=none

# UEFI: partition 1 the root file system, partition 2 the ESP.
loader() { # loader NAME OUT
  cat >"$work/$1.cfg" <<CFG
echo "anvil-grub: started $1"
search --no-floppy --fs-uuid --set=root $uuid
echo "anvil-grub: root (\$root)"
linux /boot/vmlinuz-$kver root=UUID=$uuid console=ttyS0,115200 panic=10
initrd /boot/initrd.img-$kver
boot
CFG
  grub-mkimage -O x86_64-efi -o "$2" -p /EFI -c "$work/$1.cfg" \
    part_gpt part_msdos fat ext2 diskfilter mdraid1x search search_fs_uuid linux echo boot normal
}
loader raid-entry "$work/grubx64.efi"
loader raid-removable-fallback "$work/BOOTX64.EFI"
{ printf '\xff\xfe'; printf 'grubx64.efi,anvil-raid,,Anvil lab RAID OS\n' | iconv -f utf-8 -t utf-16le; } >"$work/BOOTX64.CSV"
esp_mib=32
mkfs.vfat -n ANVILESP -C "$work/esp.img" $((esp_mib * 1024)) >/dev/null
mmd -i "$work/esp.img" ::EFI ::EFI/BOOT ::EFI/anvil
mcopy -i "$work/esp.img" "$work/BOOTX64.EFI" ::EFI/BOOT/BOOTX64.EFI
mcopy -i "$work/esp.img" "$work/grubx64.efi" "$work/BOOTX64.CSV" ::EFI/anvil/
truncate -s $((1 + root_mib + esp_mib + 1))M "$work/uefi.raw"
printf 'label: gpt\nstart=2048, size=%d, type=0FC63DAF-8483-4772-8E79-3D69D8477DE4, name="root"\nsize=%d, type=C12A7328-F81F-11D2-BA4B-00A0C93EC93B, name="EFI System Partition"\n' \
  $((root_mib * 2048)) $((esp_mib * 2048)) | sfdisk -q "$work/uefi.raw"
dd if="$work/root.raw" of="$work/uefi.raw" bs=1M seek=1 conv=notrunc status=none
dd if="$work/esp.img" of="$work/uefi.raw" bs=1M seek=$((1 + root_mib)) conv=notrunc status=none

for f in bios uefi; do
  qemu-img convert -f raw -O qcow2 "$work/$f.raw" "$out/raid-$f.qcow2"
  (cd "$out" && sha256sum "raid-$f.qcow2" | cut -d' ' -f1 >"raid-$f.qcow2.sha256" && sha512sum "raid-$f.qcow2" | cut -d' ' -f1 >"raid-$f.qcow2.sha512")
done
echo "$uuid" >"$out/rootfs-uuid"
echo "build-image-raid: root file system $root_mib MiB (UUID $uuid), raid-bios.qcow2 $(du -h "$out/raid-bios.qcow2" | cut -f1), raid-uefi.qcow2 $(du -h "$out/raid-uefi.qcow2" | cut -f1)"
