#!/usr/bin/env bash
# Install the Debian packages clairfs builds and tests with.  Idempotent:
# only missing packages are installed, so a ready machine does nothing.
set -euo pipefail

packages=(build-essential meson ninja-build pkg-config
          libfuse3-dev fuse3 liblmdb-dev lmdb-utils liburing-dev libxxhash-dev check
          libopenmpi-dev openmpi-bin
          python3-torch python3-torchvision
          bindfs attr man-db procps psmisc
          debhelper dpkg-dev
          libmicrohttpd-dev curl iproute2
          prometheus munge slurmctld slurmd slurm-client)
packages+=("$@")

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps: installing ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
