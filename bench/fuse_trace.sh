# What the hit-path benches measure of one mount besides time (sourced by
# bench-hit.sh and bench-ddp.sh): the FUSE requests its kernel connection
# was sent, per type, from the kernel's own tracepoints, and the daemon's
# CPU time.  A file of its own because both benches count the same way, and
# the count must leave out the other FUSE mounts a shared host runs at the
# same time (tests, other jobs): the tracepoints are system-wide, so each
# event is kept only when its connection is the mount's.

# fuse_conn MNT: the mount's connection as the tracepoints print it (the
# kernel's dev_t of its superblock, major << 20 | minor).
fuse_conn() {
    local maj min
    read -r maj min < <(stat -c '%Hd %Ld' "$1")
    echo $(((maj << 20) | min))
}

# proc_cpu PID: the process's user + system CPU seconds so far (all threads).
proc_cpu() {
    awk -v hz="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%.3f", ($12 + $13) / hz }' "/proc/$1/stat"
}

# fuse_trace_start FILE: records the fuse tracepoints system-wide into FILE
# in the background; sets trace_pid.  fuse_trace_stop ends it.
trace_pid=
fuse_trace_start() {
    perf record -q -a -e fuse:fuse_request_send -e fuse:fuse_request_end -o "$1" >/dev/null 2>&1 &
    trace_pid=$!
    sleep 0.5 # perf's setup: the events of the first requests would be lost
}
fuse_trace_stop() {
    [ -n "$trace_pid" ] || return 0
    kill -INT "$trace_pid" 2>/dev/null
    wait "$trace_pid" 2>/dev/null
    trace_pid=
}

# fuse_trace_report FILE CONN EPOCHS OPENS: connection CONN's requests of
# each type in FILE per epoch, per open (OPENS the opens of one epoch), and
# their mean kernel round trip (send to reply); the total per open last.
fuse_trace_report() {
    perf script -i "$1" -F time,event,trace 2>/dev/null | awk -v conn="$2" -v k="$3" -v n="$4" '
        { t = $1 + 0; c = ""; u = ""; op = "" }
        { for (i = 3; i <= NF; i++) { if ($i == "connection") c = $(i + 1); if ($i == "req") u = $(i + 1); if ($i == "opcode") op = $(i + 2) } }
        c != conn { next }
        $2 ~ /fuse_request_send/ { gsub(/[()]/, "", op); cnt[op]++; all++; start[u] = t; opof[u] = op }
        $2 ~ /fuse_request_end/ && (u in start) { rt[opof[u]] += t - start[u]; done[opof[u]]++; delete start[u] }
        END {
            printf "  %-22s %12s %10s %18s\n", "request", "per epoch", "per open", "mean round trip us"
            if (all == 0) print "  (none)"
            for (op in cnt) printf "  %-22s %12.1f %10.3f %18.1f\n", op, cnt[op] / k, cnt[op] / k / n, done[op] ? 1e6 * rt[op] / done[op] : 0
            printf "  %-22s %12.1f %10.3f\n", "all", all / k, all / k / n
        }'
}
