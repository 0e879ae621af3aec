#!/usr/bin/env bash
# Install the Debian packages a task needs, by group, so that each script
# asks only for its own: the demo need not bring Slurm, munge and
# Prometheus, which only the full suite's cluster tests start.  Idempotent:
# only missing packages are installed, so a ready machine does nothing.
#
# usage: tools/deps.sh [GROUP...] [-- PACKAGE...]
#   build   compile clairfs and its tools, run the unit tests (the default)
#   demo    build, plus what tools/demo.sh runs: PyTorch and torchvision
#   test    demo, plus everything tools/test.sh's full suite uses: MPI, the
#           packaging tools, bindfs, and the servers of the cluster suite
#           (Prometheus, munge, Slurm)
#   sanitizers  what tests/sanitizers/run.sh adds: clang with its sanitizer
#           and libFuzzer runtimes, valgrind
set -euo pipefail

build=(build-essential meson ninja-build pkg-config
       libfuse3-dev fuse3 liblmdb-dev liburing-dev libxxhash-dev libmicrohttpd-dev check)
demo=("${build[@]}" python3 python3-torch python3-torchvision procps)
test=("${demo[@]}" libopenmpi-dev openmpi-bin lmdb-utils
      bindfs attr man-db psmisc debhelper dpkg-dev curl iproute2
      prometheus munge slurmctld slurmd slurm-client)
sanitizers=(clang libclang-rt-dev valgrind)

packages=()
groups=0
while [ $# -gt 0 ]; do
    case $1 in
    build) packages+=("${build[@]}"); groups=1 ;;
    demo) packages+=("${demo[@]}"); groups=1 ;;
    test) packages+=("${test[@]}"); groups=1 ;;
    sanitizers) packages+=("${sanitizers[@]}"); groups=1 ;;
    --) shift; packages+=("$@"); break ;;
    -h | --help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "deps: unknown group '$1' (build, demo, test or sanitizers; see --help)" >&2; exit 2 ;;
    esac
    shift
done
[ $groups -eq 1 ] || packages+=("${build[@]}")

missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)

echo "deps: installing ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
