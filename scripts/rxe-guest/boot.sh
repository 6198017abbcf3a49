#!/usr/bin/env bash
# Boots the rxe guest (Debian's kernel, the initramfs of build.sh) under
# qemu-system-x86_64 with TCG: one vCPU, no KVM needed. Its virtio-net NIC is
# the tap TAP in namespace NS (net.sh up NS TAP makes them); its /init adds
# rxe0 on eth0 and then serves commands on a virtio-serial port (see init).
#
#   boot.sh --netns NS --tap TAP [--ip A.B.C.D/N] [--mtu N] [--mem MB]
#           [--ctl SOCKET] [--console FILE] [--shell]
#
#   --ctl SOCKET   the agent's port as a Unix socket (qemu listens on it)
#   --console FILE the serial console into FILE (default: this terminal)
#   --shell        a shell on the console instead of the agent (by hand)
#
# Runs qemu in the foreground (exec: its pid is this script's); it ends when
# the guest powers off or is killed.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
ns="" tap="" ip=10.14.0.2/24 mtu=1500 mem=512 ctl="" console="" shell=0
while [ $# -gt 0 ]; do
  case "$1" in
    --netns) ns=$2; shift 2 ;;
    --tap) tap=$2; shift 2 ;;
    --ip) ip=$2; shift 2 ;;
    --mtu) mtu=$2; shift 2 ;;
    --mem) mem=$2; shift 2 ;;
    --ctl) ctl=$2; shift 2 ;;
    --console) console=$2; shift 2 ;;
    --shell) shell=1; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "boot.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$ns" ] && [ -n "$tap" ] || { echo "boot.sh: --netns and --tap are required (net.sh up NS TAP makes them)" >&2; exit 2; }
qemu=$(command -v qemu-system-x86_64) || { echo "boot.sh: no qemu-system-x86_64 (apt-get install qemu-system-x86)" >&2; exit 1; }

paths=$("$here/build.sh")
kernel=$(sed -n 's/^kernel=//p' <<< "$paths")
initrd=$(sed -n 's/^initrd=//p' <<< "$paths")

# qboot (shipped with qemu) loads -kernel directly: no SeaBIOS needed, and it
# saves a second of emulated firmware.
bios=()
for f in /usr/share/qemu/qboot.rom /usr/share/qemu/bios-microvm.bin; do
  if [ -f "$f" ]; then bios=(-bios "$f"); break; fi
done

args=(
  -nodefaults -no-user-config -machine pc,accel=tcg -cpu max -smp 1 -m "$mem"
  -display none -vga none -no-reboot
  -kernel "$kernel" -initrd "$initrd"
  -append "console=ttyS0 quiet panic=-1 isoroce.ip=$ip isoroce.mtu=$mtu isoroce.shell=$shell"
  -netdev "tap,id=n0,ifname=$tap,script=no,downscript=no"
  -device "virtio-net-pci,netdev=n0,mac=52:54:00:14:00:02,romfile="
  -device virtio-serial-pci
)
args+=("${bios[@]}")
if [ -n "$ctl" ]; then
  args+=(-chardev "socket,id=ctl,path=$ctl,server=on,wait=off" -device "virtserialport,chardev=ctl,name=isoroce.ctl")
fi
if [ -n "$console" ]; then
  args+=(-serial "file:$console" -monitor none)
else
  args+=(-serial mon:stdio)
fi
exec ip netns exec "$ns" "$qemu" "${args[@]}"
