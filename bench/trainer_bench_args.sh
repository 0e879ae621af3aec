# The command line of the benches that run a trainer over mounts of several
# option sets (bench-ddp.sh, bench-hit.sh; sourced after the caller sets
# bench_name and its default reps): --build DIR, --epochs N, --reps N,
# --opts OPTIONS (again for each mount to compare; none: the defaults),
# --trace, --help (the caller's opening comment).  Sets build (absolute),
# epochs, reps, trace and configs.
build=${CLAIRFS_BUILD:-build} epochs=4 trace=0 configs=()
while [ $# -gt 0 ]; do
    case $1 in
    --build) build=${2:?}; shift 2 ;;
    --epochs) epochs=${2:?}; shift 2 ;;
    --reps) reps=${2:?}; shift 2 ;;
    --opts) configs+=("$2"); shift 2 ;;
    --trace) trace=1; shift ;;
    -h | --help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "$bench_name: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done
[ ${#configs[@]} -eq 0 ] && configs=("")
case $build in /*) ;; *) build=$top/$build ;; esac
