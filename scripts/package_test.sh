#!/usr/bin/env bash
# Builds the CPU package (a CPU-only build of `tandem`, then cpack) and checks it the way a new
# user meets it: a fresh minimal Debian 12 root (debootstrap), `apt-get install ./tandem_*.deb`
# pulling only the declared dependencies from Debian's archive, then `tandem --version` and
# `tandem generate` on the default model it ships. (A CUDA build packages as tandem-cuda, whose
# CUDA/NCCL dependencies come from NVIDIA's repository, which a fresh root does not have.) Needs
# root (chroot) and the network. Usage: scripts/package_test.sh [build-folder, default build-pkg]
set -euo pipefail
root_dir=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build-pkg}
[[ $build == /* ]] || build="$root_dir/$build"
sudo=""
[[ $(id -u) == 0 ]] || sudo=sudo

launcher=()
command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S "$root_dir" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTANDEM_CUDA=OFF \
  -DTANDEM_TESTS=OFF "${launcher[@]}" >/dev/null
cmake --build "$build" --target tandem >/dev/null
rm -f "$build"/tandem_*.deb
(cd "$build" && cpack -G DEB >/dev/null 2>&1)
deb=$(ls -t "$build"/tandem_*_amd64.deb | head -1)
echo "package: $deb"
dpkg-deb --field "$deb" Depends

command -v debootstrap >/dev/null ||
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq debootstrap >/dev/null
work=$(mktemp -d)
root="$work/root"
cleanup() {
  for m in proc dev; do $sudo umount "$root/$m" 2>/dev/null || true; done
  $sudo rm -rf "$work"
}
trap cleanup EXIT
echo "debootstrap: a minimal bookworm root"
$sudo debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >"$work/debootstrap.log" 2>&1 ||
  { tail -20 "$work/debootstrap.log"; exit 1; }
$sudo cp /etc/resolv.conf "$root/etc/resolv.conf"
$sudo cp "$deb" "$root/tmp/"
$sudo mount -t proc proc "$root/proc"
$sudo mount --bind /dev "$root/dev"
in_root() { $sudo chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root "$@"; }
in_root apt-get update -qq
in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "/tmp/$(basename "$deb")" >/dev/null
in_root tandem --version
out=$(in_root tandem generate --prompt "It is a truth universally acknowledged" --max-new-tokens 16 2>&1)
echo "$out" | tail -2
if [[ $out == *"model: /usr/share/tandem/models/tandem-austen"* && $out == *"generated"* ]]; then
  echo "package test: passed"
else
  echo "package test: FAILED"
  exit 1
fi
