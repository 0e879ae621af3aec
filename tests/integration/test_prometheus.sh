#!/usr/bin/env bash
# metrics_listen= with a real Prometheus server (Debian's prometheus, started
# here on 127.0.0.1 and stopped by PID):
#   - GET /metrics answers what .clairfs/metrics says, and promtool accepts it;
#   - Prometheus scrapes the mount and a query for clairfs_reads_total gives
#     exactly the opens the test made;
#   - a port in use is one line on stderr, a non-zero exit, nothing mounted;
#   - under mpirun each node serves its own port (9400+{rank} style).
# SKIP (77) only where prometheus/promtool/curl are not installed.
. "$(dirname "$0")/lib.sh"

for p in prometheus promtool curl; do
    command -v "$p" >/dev/null || { echo "SKIP: $p is not installed"; exit 77; }
done
cfs_setup

port_free() { ! ss -Htan "sport = :$1" | grep -q .; }
free_port() {
    local p
    for _ in $(seq 100); do
        p=$((20000 + RANDOM % 20000))
        port_free "$p" && port_free $((p + 1)) && { echo "$p"; return 0; }
    done
    return 1
}

src=$TMP/src
mnt=$TMP/mnt
"$PYTHON" "$CLAIRFS_GENDATA" --quiet --classes 3 --files 7 --size 4K "$src" ||
    { fail "gendata"; cfs_finish; }
nfiles=$(find "$src" -type f | wc -l)

mport=$(free_port) || { fail "no free port"; cfs_finish; }
check "mount with metrics_listen" cfs_mount "$src" "$mnt" "$TMP/clairfs.log" \
    -o "metrics_listen=127.0.0.1:$mport"
url=http://127.0.0.1:$mport/metrics

# Opens: every file twice (one read each, wherever the bytes come from).
find "$mnt" -type f -exec cat {} + >/dev/null
find "$mnt" -type f -exec cat {} + >/dev/null
opens=$((2 * nfiles))

http_equals_file() {
    # Both renderings of the same counters; gauges sampled in between may
    # move, so compare the families and the read counters exactly.
    curl -sf "$url" >"$TMP/http.txt" || return 1
    cat "$mnt/.clairfs/metrics" >"$TMP/file.txt"
    cmp <(grep '^# ' "$TMP/http.txt") <(grep '^# ' "$TMP/file.txt") &&
        cmp <(grep '^clairfs_reads_total' "$TMP/http.txt") <(grep '^clairfs_reads_total' "$TMP/file.txt")
}
check "GET /metrics has the families and counts of .clairfs/metrics" http_equals_file
check "promtool check metrics accepts it" bash -c 'curl -sf "$1" | promtool check metrics' _ "$url"
check "the content type is Prometheus text 0.0.4" bash -c \
    'curl -sfI "$1" | grep -qi "^content-type: text/plain; version=0.0.4"' _ "$url"
check "another path is 404" test "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$mport/x")" = 404
sum_reads() { awk '/^clairfs_reads_total/ { s += $2 } END { print s + 0 }' "$1"; }
check "the reads counted are the opens made ($opens)" test "$(sum_reads "$TMP/http.txt")" -eq "$opens"

# Prometheus itself, scraping every second.
pport=$(free_port) || { fail "no free port"; cfs_finish; }
cat >"$TMP/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
scrape_configs:
  - job_name: clairfs
    static_configs:
      - targets: ['127.0.0.1:$mport']
EOF
prometheus --config.file="$TMP/prometheus.yml" --storage.tsdb.path="$TMP/tsdb" \
    --web.listen-address="127.0.0.1:$pport" >"$TMP/prometheus.log" 2>&1 &
cfs_pids+=($!)
query() {
    curl -sf --get "http://127.0.0.1:$pport/api/v1/query" --data-urlencode "query=$1" |
        "$PYTHON" -c 'import json,sys; r=json.load(sys.stdin)["data"]["result"]; print(int(float(r[0]["value"][1])) if r else "none")'
}
scraped() {
    for _ in $(seq 300); do
        [ "$(query 'sum(clairfs_reads_total{job="clairfs"})' 2>/dev/null)" = "$1" ] && return 0
        sleep 0.1
    done
    echo "prometheus says: $(query 'sum(clairfs_reads_total)' 2>&1)"
    tail -n 5 "$TMP/prometheus.log"
    return 1
}
check "Prometheus scrapes the mount: sum(clairfs_reads_total) = $opens" scraped "$opens"
check "Prometheus sees the target up" test "$(query 'up{job="clairfs"}')" = 1

# Every expression of the Grafana dashboard is valid PromQL on these
# metrics, names only families the daemon serves, and the graphs of reads,
# stall and cache bytes have data.
dashboard=$(dirname "$0")/../../examples/grafana-clairfs.json
check_dashboard() {
    # rate() needs two scrapes in its window.
    for _ in $(seq 100); do
        [ "$(query 'count_over_time(up{job="clairfs"}[1m])')" -ge 3 ] 2>/dev/null && break
        sleep 0.1
    done
    "$PYTHON" - "$dashboard" "$pport" "$TMP/http.txt" <<'EOF'
import json, re, sys, urllib.parse, urllib.request
dash, port, served = json.load(open(sys.argv[1])), sys.argv[2], open(sys.argv[3]).read()
families = set(re.findall(r"^# TYPE (\S+) ", served, re.M))
bad = 0
for panel in dash["panels"]:
    for t in panel["targets"]:
        expr = (t["expr"].replace("$__rate_interval", "1m")
                .replace('"$job"', '".*"').replace('"$instance"', '".*"'))
        for name in re.findall(r"\b(clairfs_[a-z_]+)", expr):
            if name not in families:
                print("dashboard %r: %s is not a metric the daemon serves" % (panel["title"], name))
                bad += 1
        url = "http://127.0.0.1:%s/api/v1/query?%s" % (port, urllib.parse.urlencode({"query": expr}))
        try:
            r = json.load(urllib.request.urlopen(url, timeout=10))
        except Exception as e:
            print("dashboard %r: %s: %s" % (panel["title"], expr, e))
            bad += 1
            continue
        if r.get("status") != "success":
            print("dashboard %r: %s: %s" % (panel["title"], expr, r))
            bad += 1
        elif panel["title"] in ("Reads by source per second", "Cache bytes per tier", "Epoch") \
                and not r["data"]["result"]:
            print("dashboard %r: no data for %s" % (panel["title"], expr))
            bad += 1
sys.exit(1 if bad else 0)
EOF
}
check "the Grafana dashboard's queries run on Prometheus" check_dashboard

# A port in use: one line, non-zero, nothing mounted.
mkdir -p "$TMP/mnt2"
"$CLAIRFS" -o "metrics_listen=127.0.0.1:$mport" "$src" "$TMP/mnt2" 2>"$TMP/inuse.err"
rc=$?
check "a port in use fails the mount" test "$rc" -ne 0
check "with one line naming the address" bash -c \
    '[ "$(wc -l <"$1")" -eq 1 ] && grep -q "metrics_listen=127.0.0.1:$2: Address already in use" "$1"' \
    _ "$TMP/inuse.err" "$mport"
check "and nothing mounted" test "$(cfs_mount_count "$TMP/mnt2")" -eq 0
"$CLAIRFS" -o "metrics_listen=nonsense" "$src" "$TMP/mnt2" 2>"$TMP/bad.err"
rc=$?
check "a bad address fails the mount" test "$rc" -ne 0
check "with one line" bash -c '[ "$(wc -l <"$1")" -eq 1 ] && grep -q "expected HOST:PORT" "$1"' \
    _ "$TMP/bad.err"

fusermount3 -u "$mnt"
cfs_wait_unmounted "$mnt"
check "the port is free again after unmount" bash -c \
    'for _ in $(seq 50); do ! ss -Htln "sport = :$1" | grep -q . && exit 0; sleep 0.1; done; exit 1' _ "$mport"

# Under MPI: one port per node, 'PORT+{rank}'.
if command -v mpirun >/dev/null; then
    base=$(free_port) || { fail "no free port"; cfs_finish; }
    mkdir -p "$TMP/mpi-0" "$TMP/mpi-1"
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 \
        mpirun -np 2 --oversubscribe --mca btl self,tcp --mca btl_tcp_if_include lo \
        --mca oob_tcp_if_include lo "$CLAIRFS" -f \
        -o "metrics_listen=127.0.0.1:$base+{rank},index=$TMP/ix-{rank}" \
        "$src" "$TMP/mpi-{rank}" >"$TMP/mpi.log" 2>&1 &
    mpi_pid=$!
    cfs_pids+=("$mpi_pid")
    cfs_mounts+=("$TMP/mpi-0" "$TMP/mpi-1")
    cfs_wait_mounted "$TMP/mpi-0" "$mpi_pid" && cfs_wait_mounted "$TMP/mpi-1" "$mpi_pid"
    cat "$TMP/mpi-1/n0000/"* >/dev/null 2>&1 || cat "$(find "$TMP/mpi-1" -type f | head -n 1)" >/dev/null
    rank_reads() { curl -sf "http://127.0.0.1:$1/metrics" | awk '/^clairfs_reads_total/ { s += $2 } END { print s + 0 }'; }
    check "node 0 serves its port" test "$(rank_reads "$base")" -eq 0
    check "node 1 serves port+1, with its own reads" test "$(rank_reads $((base + 1)))" -gt 0
    fusermount3 -u "$TMP/mpi-0"
    fusermount3 -u "$TMP/mpi-1"
    wait "$mpi_pid"
fi
cfs_finish
