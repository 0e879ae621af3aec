#!/bin/bash
# clairfs-bench reads what the trainer would, the right number of times:
# per-rank stream lengths from the sampler (world, drop_last,
# drop_last_batch), --order-file epochs that cycle, exact byte counts,
# --verify catching a differing file, and clear errors.  No FUSE needed.
#
# usage: test_bench.sh PATH/TO/clairfs-bench
set -u
BENCH=${1:?usage: test_bench.sh clairfs-bench}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# 3 classes x 7 images; file k (1..21 in path order) has k*100 bytes.
k=0
for c in a b c; do
    mkdir -p "$WORK/ds/$c"
    for i in 1 2 3 4 5 6 7; do
        k=$((k + 1))
        head -c $((k * 100)) /dev/urandom > "$WORK/ds/$c/img$i.jpg"
    done
done
echo "not an image" > "$WORK/ds/a/notes.txt"

# CSV columns: label,rank,epoch,wall_s,stall_s,first_batch_s,batches,files,bytes,...
rows() { "$BENCH" --csv "$@" "$WORK/ds" | tail -n +2 | cut -d, -f2,3,7,8; }

got=$(rows -o seed=7,world=2,batch=4 --rank 1 --epochs 2 --workers 2)
[ "$got" = $'1,0,3,11\n1,1,3,11' ] || fail "world=2 rank 1: $got"
got=$(rows -o seed=7,world=2,batch=4,drop_last_batch --rank 1 --workers 3)
[ "$got" = "1,0,2,8" ] || fail "drop_last_batch: $got"
got=$(rows -o seed=7,world=2,batch=4,drop_last,ranks=0-0 --workers 0)
[ "$got" = "0,0,3,10" ] || fail "drop_last, ranks=0-0, workers 0: $got"
got=$(rows -o seed=7,batch=5,epochs=3,start_epoch=1 --workers 4 --prefetch-factor 1)
[ "$got" = $'0,1,5,21\n0,2,5,21' ] || fail "epochs=3,start_epoch=1: $got"

# An order file of two epochs, replayed for three (the third is the first again).
printf 'a/img1.jpg\nb/img2.jpg\n/c/img7.jpg\n\n# epoch 1\na/img3.jpg\n' > "$WORK/order"
got=$("$BENCH" --csv --order-file "$WORK/order" --epochs 3 -o batch=2 "$WORK/ds" | tail -n +2 | cut -d, -f3,7,8,9)
# bytes: 100 + 900 + 2100 = 3100; 300.
[ "$got" = $'0,2,3,3100\n1,1,1,300\n2,2,3,3100' ] || fail "order file: $got"

# --verify: identical copy passes, one changed byte fails naming the file.
cp -a "$WORK/ds" "$WORK/copy"
"$BENCH" -o seed=1 --verify "$WORK/copy" "$WORK/ds" >/dev/null || fail "--verify of an identical copy"
# Flip a bit: writing a fixed byte would leave the file equal one time in 256.
b=$(od -An -tu1 -j10 -N1 "$WORK/copy/b/img4.jpg" | tr -d ' ')
printf "\\$(printf '%03o' $((b ^ 1)))" | dd of="$WORK/copy/b/img4.jpg" bs=1 seek=10 conv=notrunc status=none
"$BENCH" -o seed=1 --verify "$WORK/copy" "$WORK/ds" >/dev/null 2>"$WORK/err" &&
    fail "--verify passed with a changed file"
grep -q "b/img4.jpg differs" "$WORK/err" || fail "no message naming b/img4.jpg: $(cat "$WORK/err")"

# --barrier: the ranks of world 2 meet at each epoch's end.  Rank 1 starts
# 1.5 s late, so rank 0 has read epoch 0 alone and waits: its epoch 1 must
# not begin before rank 1 has ended epoch 0 (its barrier file's time).
mkdir "$WORK/bar"
"$BENCH" --csv -o seed=7,world=2,batch=4 --rank 0 --epochs 2 --barrier "$WORK/bar" "$WORK/ds" \
    >"$WORK/bar0" 2>&1 &
b0=$!
sleep 1.5
[ -e "$WORK/bar/epoch-0.rank-0" ] || fail "--barrier: rank 0 did not mark its end of epoch 0"
[ -e "$WORK/bar/epoch-1.rank-0" ] && fail "--barrier: rank 0 ran epoch 1 without rank 1"
"$BENCH" --csv -o seed=7,world=2,batch=4 --rank 1 --epochs 2 --barrier "$WORK/bar" "$WORK/ds" \
    >"$WORK/bar1" 2>&1 || fail "--barrier: rank 1: $(cat "$WORK/bar1")"
wait $b0 || fail "--barrier: rank 0: $(cat "$WORK/bar0")"
[ "$(ls "$WORK/bar" | sort | tr '\n' ' ')" = "epoch-0.rank-0 epoch-0.rank-1 epoch-1.rank-0 epoch-1.rank-1 " ] ||
    fail "--barrier files: $(ls "$WORK/bar")"
[ "$(tail -n +2 "$WORK/bar0" | cut -d, -f2,3,7,8)" = "$(rows -o seed=7,world=2,batch=4 --rank 0 --epochs 2)" ] ||
    fail "--barrier rank 0 rows: $(cat "$WORK/bar0")"
[ "$WORK/bar/epoch-1.rank-0" -nt "$WORK/bar/epoch-0.rank-1" ] ||
    [ "$(stat -c %.9Y "$WORK/bar/epoch-1.rank-0")" = "$(stat -c %.9Y "$WORK/bar/epoch-0.rank-1")" ] ||
    fail "--barrier: rank 0 ended epoch 1 before rank 1 ended epoch 0"
"$BENCH" -o seed=7,world=2 --barrier "$WORK/nodir" "$WORK/ds" >/dev/null 2>"$WORK/err" &&
    fail "--barrier into a missing directory accepted"
grep -q "cannot create $WORK/nodir/epoch-0.rank-0" "$WORK/err" || fail "--barrier message: $(cat "$WORK/err")"

# Errors: one line, non-zero exit.
printf 'a/img1.jpg\na/missing.jpg\n' > "$WORK/bad-order"
"$BENCH" --order-file "$WORK/bad-order" "$WORK/ds" >/dev/null 2>"$WORK/err" && fail "missing file accepted"
grep -q "a/missing.jpg: No such file" "$WORK/err" || fail "missing file message: $(cat "$WORK/err")"
"$BENCH" -o seed=x "$WORK/ds" 2>"$WORK/err" && fail "seed=x accepted"
grep -q "seed=x" "$WORK/err" || fail "bad option message: $(cat "$WORK/err")"
"$BENCH" -o world=2 --rank 2 "$WORK/ds" 2>/dev/null && fail "rank 2 of world 2 accepted"
echo PASS
