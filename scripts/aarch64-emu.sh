#!/usr/bin/env bash
# mlx-builder on aarch64 under emulation (Debian's qemu-user-static + binfmt_misc).
#
#   scripts/aarch64-emu.sh make-root ROOT          # debootstrap an arm64 Debian into ROOT
#   scripts/aarch64-emu.sh test ROOT [PYTEST ARGS]  # this checkout's test suite in ROOT
#   scripts/aarch64-emu.sh run ROOT CMD...          # any command in ROOT (e.g. import a wheel)
#
# Needs root (chroot, mounts), and on Debian/Ubuntu:
#   apt-get install qemu-user-static binfmt-support debootstrap
# The tracked files of this checkout are copied to ROOT/opt/mlx-builder; the
# tool is installed there into /opt/venv with its test extras (from PyPI).
set -euo pipefail

die() { echo "aarch64-emu: $*" >&2; exit 2; }
[ $# -ge 2 ] || die "usage: $0 make-root|test|run ROOT [...]"
cmd=$1 root=$2; shift 2
suite=${SUITE:-bookworm}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

need_binfmt() {
  command -v qemu-aarch64-static >/dev/null || die "qemu-aarch64-static missing: apt-get install qemu-user-static"
  if [ ! -e /proc/sys/fs/binfmt_misc/status ]; then
    mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc || die "cannot mount binfmt_misc"
  fi
  if [ ! -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ]; then
    update-binfmts --enable qemu-aarch64 || die "cannot register qemu-aarch64 with binfmt_misc"
  fi
}

# the host's CA bundle (a TLS-intercepting proxy's CA included) serves pip in the root
host_ca=${HOST_CA:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}

mounts() {
  mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
  mountpoint -q "$root/dev" || mount --bind /dev "$root/dev"
  cp -L /etc/resolv.conf "$root/etc/resolv.conf"
  if [ -f "$host_ca" ]; then
    mkdir -p "$root/etc/ssl/certs" && cp -L "$host_ca" "$root/etc/ssl/certs/host-ca.crt"
  fi
}

unmounts() {
  umount "$root/dev" 2>/dev/null || true
  umount "$root/proc" 2>/dev/null || true
}

in_root() {
  local ca=/etc/ssl/certs/host-ca.crt
  [ -f "$root$ca" ] || ca=/etc/ssl/certs/ca-certificates.crt
  chroot "$root" /usr/bin/env -i PATH=/opt/venv/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8 \
    PIP_CERT=$ca SSL_CERT_FILE=$ca REQUESTS_CA_BUNDLE=$ca GIT_SSL_CAINFO=$ca \
    PIP_DISABLE_PIP_VERSION_CHECK=1 "$@"
}

case $cmd in
  make-root)
    need_binfmt
    command -v debootstrap >/dev/null || die "debootstrap missing: apt-get install debootstrap"
    [ -e "$root/etc/debian_version" ] && { echo "$root already holds a root"; exit 0; }
    debootstrap --arch=arm64 --variant=minbase \
      --include=python3,python3-venv,python3-pip,git,ca-certificates,patch "$suite" "$root" "$mirror"
    echo "arm64 root ready: $root ($(chroot "$root" uname -m))"
    ;;
  test)
    need_binfmt
    [ -e "$root/etc/debian_version" ] || die "$root has no root yet: run make-root first"
    here=$(git -C "$(dirname "$0")/.." rev-parse --show-toplevel)
    rm -rf "$root/opt/mlx-builder" && mkdir -p "$root/opt/mlx-builder"
    git -C "$here" ls-files -z | (cd "$here" && xargs -0 tar cf -) | tar xf - -C "$root/opt/mlx-builder"
    mounts; trap unmounts EXIT
    echo "machine in the root: $(in_root uname -m)"
    [ -x "$root/opt/venv/bin/python" ] || in_root python3 -m venv /opt/venv
    in_root sh -c "cd /opt/mlx-builder && pip install -q -e '.[test]'"
    in_root sh -c "cd /opt/mlx-builder && python -m pytest -q -p no:cacheprovider $*"
    ;;
  run)
    need_binfmt
    mounts; trap unmounts EXIT
    in_root "$@"
    ;;
  *) die "unknown command $cmd" ;;
esac
