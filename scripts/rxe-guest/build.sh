#!/usr/bin/env bash
# Builds what the rxe guest boots: Debian's kernel (linux-image-amd64, fetched
# with `apt-get download`) and a busybox initramfs holding the modules Linux rxe
# needs, rdma-core's and perftest's programs with every library they load, and
# the guest's /init (scripts/rxe-guest/init). Idempotent: everything is cached
# under $ISOROCE_RXE_CACHE (default /var/cache/isoroce/rxe-guest), keyed by the
# package versions and this folder's files, so a second run only prints paths.
#
# Prints on stdout, one per line:  kernel=PATH  initrd=PATH  (logs on stderr).
# Needs root only for apt-get update when the package lists are empty.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
cache=${ISOROCE_RXE_CACHE:-/var/cache/isoroce/rxe-guest}
mkdir -p "$cache"
log() { echo "rxe-guest: $*" >&2; }

for tool in busybox depmod modprobe cpio dpkg-deb apt-get ldd; do
  command -v "$tool" >/dev/null || { log "missing $tool (scripts/install-deps.sh installs it)"; exit 1; }
done
[ -e /bin/busybox ] && file_bb=/bin/busybox || file_bb=$(command -v busybox)
case "$(ldd "$file_bb" 2>&1 || true)" in
  *"not a dynamic"*) ;;
  *) log "$file_bb is not static: install busybox-static"; exit 1 ;;
esac

# --- the kernel package -----------------------------------------------------
# linux-image-amd64 is a metapackage; its dependency names the real one. apt-cache
# takes seconds here (no binary cache in this image): its answer is kept until
# the package lists change.
resolve() {
  apt-cache show --no-all-versions linux-image-amd64 2>/dev/null |
    sed -n 's/^Depends: .*\(linux-image-[0-9][^ ,]*\).*$/\1/p' | head -1
}
kpkg=${ISOROCE_RXE_KERNEL_PKG:-}
lists_stamp=$(stat -c '%n %Y %s' /var/lib/apt/lists/*Packages* 2>/dev/null | sha256sum | cut -c1-16)
if [ -z "$kpkg" ] && [ -f "$cache/resolved" ] && [ "$(sed -n 1p "$cache/resolved")" = "$lists_stamp" ]; then
  kpkg=$(sed -n 2p "$cache/resolved")
  kver=$(sed -n 3p "$cache/resolved")
fi
if [ -z "$kpkg" ]; then
  kpkg=$(resolve)
  if [ -z "$kpkg" ] && [ "$(id -u)" -eq 0 ]; then
    log "no package lists: apt-get update"
    apt-get update -qq >&2 || true
    kpkg=$(resolve)
    lists_stamp=$(stat -c '%n %Y %s' /var/lib/apt/lists/*Packages* 2>/dev/null | sha256sum | cut -c1-16)
  fi
fi
if [ -n "$kpkg" ] && [ -z "${kver:-}" ]; then
  kver=$(apt-cache show --no-all-versions "$kpkg" 2>/dev/null | sed -n 's/^Version: //p' | head -1)
  [ -n "$kver" ] && printf '%s\n%s\n%s\n' "$lists_stamp" "$kpkg" "$kver" > "$cache/resolved"
fi
kdir=""
if [ -n "$kpkg" ] && [ -n "${kver:-}" ]; then
  kdir="$cache/kernel/${kpkg}_${kver}"
else
  # No apt (offline): the newest kernel already in the cache.
  kdir=$(ls -d "$cache"/kernel/linux-image-* 2>/dev/null | sort -V | tail -1 || true)
  [ -n "$kdir" ] || { log "cannot resolve linux-image-amd64 and nothing is cached"; exit 1; }
  log "offline: using the cached $(basename "$kdir")"
  kpkg=$(basename "$kdir" | sed 's/_.*//')
fi
release=${kpkg#linux-image-}

# The modules rxe, rdma_cm and the guest's devices need (dependencies added by
# modprobe --show-depends). crc32_generic first: rxe's ICRC needs the crc32 shash.
modules=(crc32_generic virtio_pci virtio_net virtio_console rdma_rxe rdma_ucm ib_uverbs)

if [ ! -f "$kdir/done" ]; then
  log "fetching $kpkg $kver"
  rm -rf "$kdir" && mkdir -p "$kdir/dl"
  (cd "$kdir/dl" && apt-get download "$kpkg=$kver" >&2 2>/dev/null || apt-get download "$kpkg=$kver" >&2)
  deb=$(ls "$kdir"/dl/*.deb)
  # Only the kernel image and the module tree (no firmware, no docs).
  mkdir -p "$kdir/root"
  dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$kdir/root" --wildcards "./boot/vmlinuz-*" "./lib/modules/*"
  depmod -b "$kdir/root" "$release"
  cp "$kdir/root/boot/vmlinuz-$release" "$kdir/vmlinuz"
  # The load order: each module after what it depends on, built-ins left out.
  : > "$kdir/modules.order"
  for m in "${modules[@]}"; do
    modprobe -d "$kdir/root" -S "$release" --show-depends "$m" | awk '$1 == "insmod" {print $2}' |
      sed "s|^$kdir/root/||" >> "$kdir/modules.order"
  done
  awk '!seen[$0]++' "$kdir/modules.order" > "$kdir/modules.order.tmp" && mv "$kdir/modules.order.tmp" "$kdir/modules.order"
  # Keep only the modules the guest loads.
  mkdir -p "$kdir/modules"
  while read -r m; do
    mkdir -p "$kdir/modules/$(dirname "$m")"
    cp "$kdir/root/$m" "$kdir/modules/$m"
  done < "$kdir/modules.order"
  rm -rf "$kdir/root" "$kdir/dl"
  touch "$kdir/done"
fi

# --- the programs -----------------------------------------------------------
progs=(
  /usr/bin/ibv_devices /usr/bin/ibv_devinfo /usr/bin/ibv_rc_pingpong /usr/bin/ibv_ud_pingpong
  /usr/bin/ibv_srq_pingpong /usr/bin/ibv_uc_pingpong /usr/bin/ibv_xsrq_pingpong
  /usr/bin/ib_send_bw /usr/bin/ib_send_lat /usr/bin/ib_write_bw /usr/bin/ib_write_lat
  /usr/bin/ib_read_bw /usr/bin/ib_read_lat /usr/bin/ib_atomic_bw /usr/bin/ib_atomic_lat
  /usr/bin/rping /usr/bin/ucmatose /usr/bin/udaddy /usr/bin/cmtime /usr/bin/mckey
  /usr/bin/rdma_server /usr/bin/rdma_client /usr/bin/rdma_xserver /usr/bin/rdma_xclient
  /usr/bin/rdma
)
multiarch=/usr/lib/x86_64-linux-gnu
provider=$multiarch/libibverbs/librxe-rdmav34.so
for f in "${progs[@]}" "$provider" /etc/libibverbs.d/rxe.driver; do
  [ -e "$f" ] || { log "missing $f (scripts/install-deps.sh installs rdma-core, ibverbs-utils, rdmacm-utils, perftest, iproute2)"; exit 1; }
done

# The cache key: the kernel, every package a file of the initramfs comes from,
# and this folder's scripts.
pkgs=$(dpkg-query -W -f='${Package}=${Version}\n' busybox-static ibverbs-providers libibverbs1 librdmacm1 \
  ibverbs-utils rdmacm-utils perftest iproute2 libc6 libgcc-s1 coreutils 2>/dev/null | sort)
key=$( { echo "$kdir"; echo "$pkgs"; cat "$here/build.sh" "$here/init"; } | sha256sum | cut -c1-16)
initrd="$cache/initramfs-$key.cpio"
if [ ! -f "$initrd" ]; then
  log "building $(basename "$initrd")"
  stage=$(mktemp -d "$cache/stage.XXXXXX")
  trap 'rm -rf "$stage"' EXIT
  # The host's merged-/usr layout: /lib -> usr/lib; busybox's applets in /bin.
  mkdir -p "$stage"/{bin,sbin,usr/bin,usr/sbin,usr/lib,lib64,etc/libibverbs.d,proc,sys,dev,tmp,root,run}
  ln -s usr/lib "$stage/lib"
  mkdir -p "$stage$multiarch/libibverbs"
  cp "$file_bb" "$stage/bin/busybox"
  for applet in $("$file_bb" --list); do
    [ -e "$stage/bin/$applet" ] || ln -s busybox "$stage/bin/$applet"
  done
  # The programs, the rxe provider and every library they load, at the same
  # paths as here (the guest's ld.so finds them through its default paths).
  libs=()
  for f in "${progs[@]}" "$provider"; do
    cp "$f" "$stage$f"
    while read -r lib; do libs+=("$lib"); done < <(ldd "$f" | awk '/=>/ && $3 ~ /^\// {print $3} /^\t\/lib64/ {print $1}')
  done
  # glibc loads libgcc_s for pthread_exit/cancellation: rping aborts without it.
  libs+=("$multiarch/libgcc_s.so.1")
  for lib in $(printf '%s\n' "${libs[@]}" | sort -u); do
    dir=$(dirname "$lib")
    case "$dir" in /lib/*) dir="/usr$dir" ;; esac
    mkdir -p "$stage$dir"
    cp "$(readlink -f "$lib")" "$stage$dir/$(basename "$lib")"
  done
  mkdir -p "$stage/usr/lib/modules/$release"
  cp -r "$kdir/modules/lib/modules/$release/." "$stage/usr/lib/modules/$release/"
  sed "s|^lib/modules/$release/||" "$kdir/modules.order" > "$stage/usr/lib/modules/$release/isoroce.order"
  cp /etc/libibverbs.d/rxe.driver "$stage/etc/libibverbs.d/"
  printf '127.0.0.1 localhost\n' > "$stage/etc/hosts"
  printf 'root:x:0:0:root:/root:/bin/sh\n' > "$stage/etc/passwd"
  printf 'root:x:0:\n' > "$stage/etc/group"
  cp "$here/init" "$stage/init"
  chmod 755 "$stage/init"
  # Uncompressed: the guest unpacks it in a blink, compression would cost
  # seconds of emulated CPU at every boot.
  (cd "$stage" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc --quiet) > "$initrd.tmp"
  mv "$initrd.tmp" "$initrd"
  # Older initramfs images of this cache are stale now.
  for old in "$cache"/initramfs-*.cpio; do [ "$old" = "$initrd" ] || rm -f "$old"; done
  log "$(du -h "$initrd" | cut -f1) initramfs"
fi

echo "kernel=$kdir/vmlinuz"
echo "initrd=$initrd"
