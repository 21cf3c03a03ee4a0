#!/usr/bin/env bash
# Builds the root file system of the Ironic Python Agent ramdisk from
# Debian packages: debootstrap minbase plus IPA's Python dependencies
# and the tools its GenericHardwareManager calls, without documentation,
# locales or package lists. build-ramdisk.sh adds IPA, the kernel's
# modules and /init; this part, the slow one, is cached apart, so a
# change there does not run debootstrap again.
#
# usage: build-root.sh OUT_DIR
# writes OUT_DIR/root.tar.zst and OUT_DIR/packages (the Debian packages
# and versions in the root).
# env: ANVIL_DEBIAN_MIRROR (default http://deb.debian.org/debian),
#      ANVIL_DEBIAN_SUITE (default bookworm), ANVIL_EXTRA_PACKAGES
#      (comma-separated Debian packages).
set -euo pipefail

out=$1
mirror=${ANVIL_DEBIAN_MIRROR:-http://deb.debian.org/debian}
suite=${ANVIL_DEBIAN_SUITE:-bookworm}

for tool in debootstrap zstd tar; do
  command -v "$tool" >/dev/null || { echo "build-root: $tool is missing" >&2; exit 3; }
done

work=$(mktemp -d "${TMPDIR:-/tmp}/anvil-ipa-root.XXXXXX")
trap 'rm -rf "$work"' EXIT
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
# The caller's extra packages (comma-separated names).
if [ -n "${ANVIL_EXTRA_PACKAGES:-}" ]; then
  IFS=, read -r -a extra <<<"$ANVIL_EXTRA_PACKAGES"
  pkgs+=("${extra[@]}")
fi
include=$(IFS=,; echo "${pkgs[*]}")
echo "build-root: debootstrap $suite (minbase + ${#pkgs[@]} packages)"
debootstrap --variant=minbase --include="$include" "$suite" "$root" "$mirror" >"$work/debootstrap.log" 2>&1 || {
  tail -n 30 "$work/debootstrap.log" >&2
  exit 1
}
chroot "$root" dpkg-query -W -f='${Package} ${Version}\n' | sort >"$out/packages"


# What a ramdisk does not need.
rm -rf "$root"/usr/share/doc/* "$root"/usr/share/man/* "$root"/usr/share/info/* \
  "$root"/usr/share/locale/* "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin \
  "$root"/var/cache/apt/archives/*.deb "$root"/usr/share/i18n/* "$root"/usr/share/zoneinfo-* 2>/dev/null || true

# Numeric owners, a fixed order: the archive build-ramdisk.sh unpacks.
tar -C "$root" --numeric-owner --sort=name -cf - . | zstd -q -3 -T0 -o "$out/root.tar.zst"
echo "build-root: $(du -h "$out/root.tar.zst" | cut -f1), $(wc -l <"$out/packages") packages"
