# What a bench that mounts clairfs does at exit (sourced): its mounts
# unmounted (lazily where a reader still holds one), the processes it
# started stopped and waited for, its work directory removed unless
# BENCH_KEEP=1; the exit status kept.  Mounts go latest first: one may be
# mounted over an earlier one (clairfs over an emulated PFS).
# The sourcing script appends to the arrays pids and mnts and sets work
# once it has made it; bench_name names it in the "kept" line.
work= mnts=() pids=()
bench_cleanup() {
    local rc=$? m p i
    trap - EXIT INT TERM
    for ((i = ${#mnts[@]} - 1; i >= 0; i--)); do
        m=${mnts[i]}
        grep -qF " $m " /proc/self/mountinfo &&
            { fusermount3 -u "$m" 2>/dev/null || fusermount3 -u -z "$m" 2>/dev/null; }
    done
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && kill "$p" 2>/dev/null; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
    if [ -n "$work" ] && [ "${BENCH_KEEP:-0}" = 1 ]; then
        echo "${bench_name:-bench}: kept $work"
    elif [ -n "$work" ]; then
        rm -rf --one-file-system "$work"
    fi
    exit $rc
}
trap bench_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
