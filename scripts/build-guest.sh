#!/usr/bin/env bash
# build-guest.sh - build (or find in the cache) the small Linux guest of the QEMU tests.
#
#   scripts/build-guest.sh [--cache DIR] [--no-install] [--quiet]
#
# Contract
# --------
#  - Installs what is missing (as root, or through sudo; DEBIAN_FRONTEND=noninteractive,
#    only packages dpkg does not already have): qemu-system-x86 (qemu-system-x86_64),
#    busybox-static, iperf3 (the guest's copy and the host's server), iputils-ping (the
#    guest's ping), ethtool (the guest's: queue counts and offload state), xz-utils.
#    --no-install: only checks, exit 2 when something is missing.
#  - The kernel: the version Debian's `linux-image-amd64` depends on (apt-cache depends),
#    fetched with `apt-get download linux-image-VERSION-amd64` and unpacked with dpkg-deb
#    into CACHE/kernel-VERSION/ (kept: later builds reuse it). vmlinux is cut out of
#    vmlinuz (the xz stream starting at FD 37 7A 58 5A 00): an uncompressed kernel boots
#    in 4-5 s under TCG instead of 11.
#  - The initramfs (newc cpio, uncompressed: nothing to inflate at boot), made with
#    `busybox cpio -o -H newc` (no cpio binary needed): busybox-static and a symlink per
#    applet, the virtio modules (virtio_ring virtio virtio_pci_modern_dev
#    virtio_pci_legacy_dev virtio_pci failover net_failover virtio_net; .ko.xz are
#    unpacked), iperf3, iputils' ping and ethtool with every library `ldd` names and
#    the dynamic loader, and
#    scripts/guest-init.sh as /init (its contract: what the guest runs and prints).
#  - Cache: CACHE/KEY/{vmlinux,initramfs.cpio,KEY} with KEY = kernel version + the first
#    12 hex digits of sha256(this script + guest-init.sh); an unchanged guest is found
#    in ~0 s. CACHE defaults to build/guest/ in the repository (git-ignored).
#    Concurrent runs are serialized with flock on CACHE/.lock.
#  - Output: the last line on stdout is
#      GUEST_KERNEL=PATH GUEST_INITRD=PATH GUEST_VERSION=VERSION
#    (`eval` it); progress goes to stderr. Exit 0, or 1 with a reason.
set -euo pipefail
HERE=$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")
ROOT=$(dirname "$HERE")

cache=$ROOT/build/guest install=1 quiet=0
while (($#)); do
  case $1 in
    --cache) cache=$2; shift 2 ;;
    --no-install) install=0; shift ;;
    --quiet) quiet=1; shift ;;
    *) echo "usage: build-guest.sh [--cache DIR] [--no-install] [--quiet]" >&2; exit 64 ;;
  esac
done

log() { ((quiet)) || echo "build-guest: $*" >&2; }
die() { echo "build-guest: $*" >&2; exit 1; }

# ---------------------------------------------------------------- host packages
PACKAGES=(qemu-system-x86 busybox-static iperf3 iputils-ping ethtool xz-utils)
missing=()
installed=$(dpkg-query -W -f='${Package} ${db:Status-Status}\n' "${PACKAGES[@]}" 2>/dev/null || true)
for pkg in "${PACKAGES[@]}"; do
  grep -qx "$pkg installed" <<<"$installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  ((install)) || { echo "build-guest: missing packages: ${missing[*]}" >&2; exit 2; }
  SUDO=()
  [[ $(id -u) -eq 0 ]] || SUDO=(sudo)
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # Other jobs on the machine may hold dpkg's lock for a while: wait for it.
  "${SUDO[@]}" apt-get -o DPkg::Lock::Timeout=600 update -qq
  "${SUDO[@]}" apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >&2
fi
for tool in qemu-system-x86_64 busybox iperf3 ping ethtool xz; do
  command -v "$tool" >/dev/null || die "$tool not found after installing ${PACKAGES[*]}"
done

# ---------------------------------------------------------------- kernel version
# apt-cache reads every package list (about 12 s on a busy machine with apt's binary
# cache disabled, as in Debian's container images): remember its answer next to the
# identity of the lists it came from, and ask again only when they change.
mkdir -p "$cache"
lists_id=$(stat -c '%n %Y %s' /var/lib/apt/lists/*Packages* 2>/dev/null | sha256sum | cut -c1-16)
kernel_dep() {
  apt-cache depends linux-image-amd64 2>/dev/null |
    sed -n 's/^ *Depends: linux-image-\([0-9][^ ]*-amd64\)$/\1/p' | head -n 1
}
version=""
if [[ -s $cache/kernel-version ]] && [[ $(head -n 1 "$cache/kernel-version") == "$lists_id" ]]; then
  version=$(sed -n 2p "$cache/kernel-version")
fi
if [[ -z $version ]]; then
  version=$(kernel_dep)
  [[ -n $version ]] && printf '%s\n%s\n' "$lists_id" "$version" >"$cache/kernel-version"
fi
if [[ -z $version ]]; then
  # No package lists yet (a fresh machine): read them once.
  log "apt-cache knows no linux-image-amd64: apt-get update"
  SUDO=()
  [[ $(id -u) -eq 0 ]] || SUDO=(sudo)
  "${SUDO[@]}" apt-get -o DPkg::Lock::Timeout=600 update -qq
  version=$(kernel_dep)
fi
[[ -n $version ]] || die "cannot tell which kernel linux-image-amd64 depends on (apt-cache depends)"

exec 9>"$cache/.lock"
flock 9

key=$version-$(cat "$HERE/build-guest.sh" "$HERE/guest-init.sh" | sha256sum | cut -c1-12)
out=$cache/$key
if [[ -s $out/vmlinux && -s $out/initramfs.cpio && -e $out/KEY ]]; then
  log "cached: $out"
  echo "GUEST_KERNEL=$out/vmlinux GUEST_INITRD=$out/initramfs.cpio GUEST_VERSION=$version"
  exit 0
fi

# ---------------------------------------------------------------- kernel package
kdir=$cache/kernel-$version
if [[ ! -e $kdir/.unpacked ]]; then
  log "downloading linux-image-$version"
  rm -rf "$kdir"
  mkdir -p "$kdir/deb"
  # apt downloads as its _apt user when that user may write the folder (else it warns).
  if [[ $(id -u) -eq 0 ]] && id _apt >/dev/null 2>&1; then chown _apt "$kdir/deb"; fi
  (cd "$kdir/deb" && apt-get download -q "linux-image-$version" >&2) || die "apt-get download linux-image-$version failed"
  dpkg-deb -x "$kdir"/deb/linux-image-"$version"_*.deb "$kdir/root"
  rm -rf "$kdir/deb"
  touch "$kdir/.unpacked"
fi
vmlinuz=$kdir/root/boot/vmlinuz-$version
moddir=$kdir/root/lib/modules/$version
[[ -s $vmlinuz && -d $moddir ]] || die "the kernel package has no $vmlinuz or $moddir"

tmp=$(mktemp -d "$cache/.build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

# vmlinux: the xz stream inside vmlinuz (bzImage = setup code + compressed kernel).
offset=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$vmlinuz" | head -n 1 | cut -d: -f1)
[[ -n $offset ]] || die "no xz stream in $vmlinuz"
# xz stops at the end of the stream; the bytes after it (bzImage trailer) make it
# complain, which is expected: check the result instead of xz's status.
tail -c +$((offset + 1)) "$vmlinuz" | xz -dc >"$tmp/vmlinux" 2>/dev/null || true
[[ $(head -c 4 "$tmp/vmlinux" | od -An -tx1 | tr -d ' ') == 7f454c46 ]] || die "what came out of $vmlinuz is not an ELF kernel"

# ---------------------------------------------------------------- initramfs tree
r=$tmp/root
mkdir -p "$r"/{bin,sbin,usr/bin,usr/sbin,proc,sys,dev,tmp,run,etc,lib64,root}
cp /bin/busybox "$r/bin/busybox"
for applet in $("$r/bin/busybox" --list-full); do
  [[ -e $r/$applet ]] || ln -s /bin/busybox "$r/$applet"
done
# The modules virtio_net needs (any that the kernel has built in are simply absent).
for m in virtio_ring virtio virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci failover net_failover virtio_net; do
  f=$(find "$moddir/kernel" \( -name "$m.ko" -o -name "$m.ko.xz" \) | head -n 1)
  [[ -n $f ]] || { log "module $m not in the package (built in?)"; continue; }
  rel=${f#"$moddir"/}
  mkdir -p "$r/lib/modules/$version/$(dirname "$rel")"
  if [[ $f == *.xz ]]; then
    xz -dc "$f" >"$r/lib/modules/$version/${rel%.xz}"
  else
    cp "$f" "$r/lib/modules/$version/$rel"
  fi
done
# iperf3, ethtool and iputils' ping (as /usr/bin/iputils-ping: busybox's ping miscounts replies
# under TCG, see guest-init.sh), their libraries and the loader, at the paths the
# binaries ask for.
mkdir -p "$r/usr/bin"
cp -L /usr/bin/iperf3 "$r/usr/bin/iperf3"
cp -L /usr/bin/ping "$r/usr/bin/iputils-ping"
cp -L "$(command -v ethtool)" "$r/usr/sbin/ethtool"
for lib in $(ldd /usr/bin/iperf3 /usr/bin/ping "$(command -v ethtool)" | grep -o '/[^ ]*' | grep -v ':$' | sort -u); do
  mkdir -p "$r$(dirname "$lib")"
  cp -L "$lib" "$r$lib"
done
echo "root:x:0:0:root:/root:/bin/sh" >"$r/etc/passwd"
cp "$HERE/guest-init.sh" "$r/init"
chmod 755 "$r/init"
(cd "$r" && find . -mindepth 1 | "$r/bin/busybox" cpio -o -H newc >"$tmp/initramfs.cpio" 2>/dev/null)
[[ -s $tmp/initramfs.cpio ]] || die "busybox cpio wrote nothing"

mkdir -p "$out.new"
mv "$tmp/vmlinux" "$tmp/initramfs.cpio" "$out.new/"
echo "$key" >"$out.new/KEY"
rm -rf "$out"
mv "$out.new" "$out"
# Older guests of the same cache (another kernel or init) are not needed any more.
for old in "$cache"/*/KEY; do
  [[ -e $old ]] || continue
  d=$(dirname "$old")
  [[ $d == "$out" ]] || rm -rf "$d"
done
log "built $out ($(du -sh "$out" | cut -f1))"
echo "GUEST_KERNEL=$out/vmlinux GUEST_INITRD=$out/initramfs.cpio GUEST_VERSION=$version"
