#!/bin/sh
# amped-run decomposing: the report, factor files, --json, --init,
# --mttkrp-only, --check, and errors that leave no partial output.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

TRY="Try 'amped-run --help' for more information."
AMINO=$AMP_TEST_DATA/aminoacid.tns
SAMPLE=$top_srcdir/data/sample.tns.zst

run "$AMPED_PREP" -q -o "$T/sample.amp" "$SAMPLE"
check_status "the bundled sample prepares" 0

# ---- a decomposition and its report ------------------------------------------
run "$AMPED_RUN" --gpus 0 -r 4 --iters 5 --tol 0 -t 2 -o "$T/f" --json "$T/r.json" "$T/sample.amp"
check_status "rank 4, 5 iterations: exit 0" 0
check_contains "the header names the tensor" "$RUN_OUT" "tensor:    $T/sample.amp"
check_contains "the header names backend and threads" "$RUN_OUT" "backend:   cpu, 2 threads, precision f64"
n=$(grep -c '^ *[1-5]  [0-9.]*  [0-9.e+-]*  *[0-9.]*$' "$RUN_OUT")
is "one line per iteration (--tol 0 runs them all)" "$n" 5
check_contains "the final fit is printed" "$RUN_OUT" "final fit: "
check_contains "the time breakdown is printed" "$RUN_OUT" "time:      load "
check_empty "nothing on stderr" "$RUN_ERR"
for m in 1 2 3; do
    check "factor file mode $m exists" test -s "$T/f.mode$m.mat"
done
check "lambda file exists" test -s "$T/f.lambda.mat"
is "lambda has rank lines" "$(wc -l <"$T/f.lambda.mat" | tr -d ' ')" 4
dims=$(sed -n 's/^tensor: .*dims \([0-9x]*\) .*/\1/p' "$RUN_OUT")
d1=${dims%%x*}
is "mode 1 has one row per original index" "$(wc -l <"$T/f.mode1.mat" | tr -d ' ')" "$d1"
is "every row has rank values" "$(awk 'NF != 4' "$T/f.mode1.mat" | wc -l | tr -d ' ')" 0
check "no temporary files are left" test -z "$(ls -a "$T" | grep '\.tmp\.')"

# The JSON report carries the same figures.
if command -v python3 >/dev/null 2>&1; then
    fit_text=$(sed -n 's/^final fit: \([0-9.]*\) .*/\1/p' "$RUN_OUT")
    run python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["rank"] == 4 and d["backend"] == "cpu" and d["threads"] == 2
assert len(d["iterations"]) == 5 and [i["iter"] for i in d["iterations"]] == [1, 2, 3, 4, 5]
assert d["final_fit"] == d["iterations"][-1]["fit"]
assert abs(d["final_fit"] - float(sys.argv[2])) < 1e-9
assert set(["load", "mttkrp", "gram", "solve", "normalize", "fit", "output", "total"]) <= set(d["timings"])
assert d["tensor"]["modes"] == 3 and len(d["tensor"]["dims"]) == 3
print("ok")' "$T/r.json" "$fit_text"
    check_status "--json: valid JSON with the report's figures" 0
else
    skip "the JSON report parses" "no python3 to read the JSON"
fi

# ---- determinism and --init ------------------------------------------------------
run "$AMPED_RUN" --gpus 0 -r 4 --iters 5 --tol 0 -t 2 -o "$T/g" "$T/sample.amp"
check_status "the same run again: exit 0" 0
check "the same seed and threads give the same factor files" cmp -s "$T/f.mode2.mat" "$T/g.mode2.mat"
run "$AMPED_RUN" --gpus 0 -r 4 --iters 5 --tol 0 -t 2 --seed 7 -o "$T/h" "$T/sample.amp"
check_status "--seed 7: exit 0" 0
# Both files written, and different (cmp exits 1 only for files that differ).
check "another seed gives other factors" sh -c 'test -s "$1" && test -s "$2" && { cmp -s "$1" "$2"; test $? -eq 1; }' sh "$T/f.mode2.mat" "$T/h.mode2.mat"
run "$AMPED_RUN" --gpus 0 -r 4 --iters 1 --tol 0 --init "$T/f" "$T/sample.amp"
check_status "--init PREFIX starts from written factors" 0
check_contains "--init is reported" "$RUN_OUT" "starting factors from $T/f.mode*.mat"
run "$AMPED_RUN" --gpus 0 -r 5 --init "$T/f" "$T/sample.amp"
check_status "--init with another rank fails" 1
check_contains "--init: the bad file and line are named" "$RUN_ERR" "$T/f.mode1.mat:1: expected 5 values"
for m in 1 3; do cp "$T/f.mode$m.mat" "$T/nan.mode$m.mat"; done
awk 'NR == 2 { $3 = "nan" } { print }' "$T/f.mode2.mat" > "$T/nan.mode2.mat"
run "$AMPED_RUN" --gpus 0 -r 4 --init "$T/nan" "$T/sample.amp"
check_status "--init with a NaN in a factor fails" 1
check_contains "--init: the NaN's file, line and column are named" "$RUN_ERR" "$T/nan.mode2.mat:2: value 3 is not a finite number"

# ---- the stopping rule ----------------------------------------------------------
# The first iteration's change is the fit itself: on the sample it is below
# --tol 1e-3, and the run must not stop there (the rule starts from the
# second iteration); the second's change is below it, so it stops there.
run "$AMPED_RUN" --gpus 0 -r 4 -t 2 --tol 1e-3 "$T/sample.amp"
check_status "--tol 1e-3: exit 0" 0
check_contains "--tol 1e-3: converged after 2 iterations, not after the first" "$RUN_OUT" \
    "after 2 iterations (converged)"

# ---- factors in the original index space, checked by value -----------------------
# x(i,j,k) = i j k on i in {2,4,5}, j in {1,3}, k in {2,3}, with dims 6 x 4 x 3:
# a rank-1 tensor with empty slices, so the file's rows are a relabelling
# of the original ones. Rank-1 CP-ALS recovers it exactly, and mode 1's
# factor, written in the original index space, must be 0 on the empty
# slices 1, 3 and 6 and proportional to i on 2, 4 and 5.
for i in 2 4 5; do for j in 1 3; do for k in 2 3; do
    echo "$i $j $k $((i * j * k))"
done; done; done >"$T/r1.tns"
run "$AMPED_PREP" -q --dims=6,4,3 -o "$T/r1.amp" "$T/r1.tns"
check_status "a rank-1 tensor with empty slices prepares" 0
run "$AMPED_RUN" --gpus 0 -r 1 --iters 30 --tol 0 -t 2 -o "$T/r1" "$T/r1.amp"
check_status "rank 1 on it: exit 0" 0
check_contains "rank 1 on it: fit 1" "$RUN_OUT" "final fit: 1.0000000000"
# Every row a number (mawk compares nan as equal to anything, so a nan row
# passed both tests below), and the index's multiple positive (all-zero
# rows are proportional to anything).
verdict=$(awk "$AWK_NUM"' NF != 1 { print "line " NR ": " NF " values"; exit }
    !num($1) { print "row " NR " is " $1; exit }
    NR == 1 || NR == 3 || NR == 6 { if ($1 + 0 != 0) { print "row " NR " (empty slice) is " $1; exit } ; next }
    { r = $1 / NR; if (seen && (r - first > 1e-9 * first || first - r > 1e-9 * first)) { print "row " NR " / " NR " = " r ", not " first; exit }
      if (!seen) { first = r; seen = 1 } }
    END { if (NR != 6) print NR " rows, not 6"; else if (!(first > 0)) print "rows 2, 4, 5 are " first " times the index" }' "$T/r1.mode1.mat" 2>&1)
is "mode 1's written rows: 0 on empty slices, proportional to the index elsewhere" "$verdict" ""

# ---- npy ---------------------------------------------------------------------------
run "$AMPED_RUN" --gpus 0 -q -r 3 --iters 2 --format npy -o "$T/n" "$T/sample.amp"
check_status "--format npy: exit 0" 0
check "npy: mode 1 file starts with the NumPy magic" sh -c "head -c 6 '$T/n.mode1.npy' | od -c | grep -q 'N   U   M   P   Y'"
# readback.sh reads every form back; this is the quick look. The python
# is AMP_TEST_PYTHON's, as there, and under CI one without NumPy fails.
NPY_PY=${AMP_TEST_PYTHON:-python3}
if "$NPY_PY" -c 'import numpy' >/dev/null 2>&1; then
    run "$NPY_PY" -c '
import numpy, sys
p = sys.argv[1]
a = numpy.load(p + ".mode1.npy"); l = numpy.load(p + ".lambda.npy")
assert a.dtype == numpy.float64 and a.shape[1] == 3 and l.shape == (3,)
print("ok")' "$T/n"
    check_status "numpy.load reads the npy factors" 0
elif test "${CI:-}" = true; then
    fail "the npy files load in numpy: no NumPy in $NPY_PY (CI=true needs it)"
else
    skip "the npy files load in numpy" "no numpy in $NPY_PY (AMP_TEST_PYTHON names a python that has it)"
fi

# ---- --mttkrp-only and --check ------------------------------------------------------
run "$AMPED_RUN" --gpus 0 --mttkrp-only --iters 2 -r 8 "$T/sample.amp"
check_status "--mttkrp-only: exit 0" 0
check_contains "--mttkrp-only: per-mode times" "$RUN_OUT" "mode 3: "
check_contains "--mttkrp-only: the total" "$RUN_OUT" "all modes: "
for p in f64 f32; do
    run "$AMPED_RUN" --gpus 0 --check --precision $p -r 16 "$T/sample.amp"
    check_status "--check --precision $p passes" 0
    check_contains "--check $p prints the error per mode" "$RUN_OUT" "mode 3: largest relative error"
done
if test -f "$AMINO"; then
    run "$AMPED_PREP" -q -o "$T/amino.amp" "$AMINO"
    check_status "aminoacid.tns prepares" 0
    run "$AMPED_RUN" --gpus 0 -q -r 3 --iters 400 --tol 1e-10 --json "$T/a.json" "$T/amino.amp"
    check_status "aminoacid.tns at rank 3: exit 0" 0
    fit=$(sed -n 's/.*"final_fit": \([0-9.]*\).*/\1/p' "$T/a.json")
    check "aminoacid.tns at rank 3: fit $fit > 0.97 from the command line" awk -v f="$fit" 'BEGIN { exit !(f > 0.97) }'
elif test "${CI:-}" = true; then
    fail "aminoacid at rank 3: no $AMINO (CI=true needs ../shared/data)"
else
    skip "aminoacid at rank 3" "no aminoacid.tns"
fi

# ---- errors ---------------------------------------------------------------------------
run "$AMPED_RUN" --gpus 0 -r 0 "$T/sample.amp"
check_status "rank 0 is a usage error" 2
check_contains "rank 0: the option and range are named" "$RUN_ERR" "--rank"
check_last_line "rank 0: ends with the --help hint" "$RUN_ERR" "$TRY"
run "$AMPED_RUN" --gpus 0 --precision f16 "$T/sample.amp"
check_status "an unknown precision is a usage error" 2
run "$AMPED_RUN" --gpus 0 --format csv "$T/sample.amp"
check_status "an unknown format is a usage error" 2
run "$AMPED_RUN" --gpus 0 --tol -1 "$T/sample.amp"
check_status "a negative tolerance is a usage error" 2
run "$AMPED_RUN" --gpus 0 --check --mttkrp-only "$T/sample.amp"
check_status "two actions at once are a usage error" 2
run "$AMPED_RUN" --gpus 0 --bogus "$T/sample.amp"
check_status "an unknown option is a usage error" 2

printf '1 1 1 1.5\n2 3 1 2\n3 2 4 -1\n1 4 2 0.5\n2 2 3 3\n' >"$T/tiny.tns"
run "$AMPED_PREP" -q -o "$T/tiny.amp" "$T/tiny.tns"
check_status "a 5-nonzero tensor prepares" 0
run "$AMPED_RUN" --gpus 0 -r 6 --iters 3 "$T/tiny.amp"
check_status "a rank above a dimension still runs" 0
check_contains "... with a warning naming the mode" "$RUN_ERR" "warning: rank 6 is larger than mode 1's 3 nonempty indices"

# A corrupt file: a flipped byte in the middle of a chunk.
cp "$T/sample.amp" "$T/bad.amp"
size=$(wc -c <"$T/bad.amp" | tr -d ' ')
printf '\377' | dd of="$T/bad.amp" bs=1 seek=$((size / 2)) conv=notrunc 2>/dev/null
run "$AMPED_RUN" --gpus 0 -r 4 -o "$T/bad" --json "$T/bad.json" "$T/bad.amp"
check_status "a corrupt file exits 1" 1
check_contains "the corrupt file is named" "$RUN_ERR" "$T/bad.amp"
check "a corrupt file leaves no factor or JSON output" test -z "$(ls -a "$T" | grep '^bad\.' | grep -v '^bad\.amp$')"
# The same without --gpus: a GPU run reads the nonzeros straight to the
# GPU, a machine without one falls back to the CPU after the tables.
run "$AMPED_RUN" -r 4 -o "$T/bad" --json "$T/bad.json" "$T/bad.amp"
check_status "a corrupt file, backend chosen at run time, exits 1" 1
check_contains "... naming the file" "$RUN_ERR" "$T/bad.amp"
check "... leaving no factor or JSON output" test -z "$(ls -a "$T" | grep '^bad\.' | grep -v '^bad\.amp$')"
run "$AMPED_RUN" --gpus 0 -r 4 "$T/missing.amp"
check_status "a missing file exits 1" 1

# Output that cannot be written: no partial files under the final names.
mkdir "$T/ro" && chmod 555 "$T/ro"
if ! touch "$T/ro/x" 2>/dev/null; then
    run "$AMPED_RUN" --gpus 0 -r 4 --iters 1 -o "$T/ro/f" "$T/sample.amp"
    check_status "an unwritable output directory exits 1" 1
    check "... and nothing is left there" test -z "$(ls "$T/ro")"
else
    rm -f "$T/ro/x"
    skip "an unwritable output directory" "running as a user who can write anywhere"
fi

# ---- the GPU backend ------------------------------------------------------------------
# Without a GPU, asking for one is a clear error; with one, the GPU run
# reaches the CPU's fit from the same seed (f64, within 1e-6 after a few
# iterations: only the summation order differs).
run "$AMPED_RUN" --gpus 65 "$T/sample.amp"
check_status "--gpus 65 is a usage error" 2
run "$AMPED_RUN" --devices 0,0 "$T/sample.amp"
check_status "--devices naming a GPU twice is a usage error" 2
run "$AMPED_RUN" --gpus 2 --devices 0 "$T/sample.amp"
check_status "--gpus and --devices that disagree are a usage error" 2
run "$AMPED_RUN" --partition rows "$T/sample.amp"
check_status "an unknown --partition is a usage error" 2
run "$AMPED_RUN" --send-parts 9 "$T/sample.amp"
check_status "--send-parts above 8 is a usage error" 2
check_contains "... naming auto and the range" "$RUN_ERR" "expected auto or an integer from 1 to 8"
run "$AMPED_RUN" --send-parts 0 "$T/sample.amp"
check_status "--send-parts 0 is a usage error" 2
check_contains "... naming auto and the range" "$RUN_ERR" "expected auto or an integer from 1 to 8"
run "$AMPED_RUN" --exchange dma "$T/sample.amp"
check_status "an unknown --exchange is a usage error" 2
check_contains "... naming the choices" "$RUN_ERR" "copy"
run "$AMPED_RUN" --gpus 0 --exchange copy "$T/sample.amp"
check_status "--exchange with --gpus 0 (the CPU) is a usage error" 2
run "$AMPED_RUN" --overlap --send-parts 2 "$T/sample.amp"
check_status "--overlap with --send-parts 2 is a usage error" 2
check_contains "... that says to give one" "$RUN_ERR" "give one"
run "$AMPED_RUN" --gpus 0 --device-memory 0 "$T/sample.amp"
check_status "--device-memory 0 is a usage error" 2
run "$AMPED_RUN" --gpus 0 --host-memory 12Q "$T/sample.amp"
check_status "--host-memory with a bad suffix is a usage error" 2
run "$AMPED_RUN" --gpus 0 --memory disk "$T/sample.amp"
check_status "an unknown --memory is a usage error" 2
run "$AMPED_RUN" --gpus 2 --memory remap "$T/sample.amp"
check_status "--memory remap on 2 GPUs is a usage error (one GPU for now)" 2
check_contains "... that says so and what to give" "$RUN_ERR" "--memory remap runs on one GPU for now, and --gpus asks for 2: give --gpus 1"
run "$AMPED_RUN" --devices 0,1 --memory remap "$T/sample.amp"
check_status "--memory remap on --devices 0,1: the same" 2
run "$AMPED_RUN" --gpus 0 --stream-chunk 10 "$T/sample.amp"
check_status "--stream-chunk below 1024 is a usage error" 2
if "$AMPED_RUN" --list-devices >/dev/null 2>&1; then
    run "$AMPED_RUN" --gpus 1 -r 4 --iters 8 --tol 0 -o "$T/gpu" --json "$T/gpu.json" "$T/sample.amp"
    check_status "--gpus 1: exit 0" 0
    check_contains "--gpus 1: the header names the GPU" "$RUN_OUT" "backend:   gpu 0 ("
    check_contains "--gpus 1: GPU phase times" "$RUN_OUT" "GPU time: mttkrp"
    check_contains "--gpus 1: the JSON names the backend" "$T/gpu.json" '"backend": "gpu"'
    check_contains "--gpus 1, resident: the nonzeros go from the file straight to the GPU" "$RUN_OUT" "the nonzeros from the file straight to the GPU"
    check_contains "... and are not held in host memory" "$RUN_OUT" "not held in host memory"
    check_contains "... which the JSON says" "$T/gpu.json" '"direct_upload": true'
    run "$AMPED_RUN" --gpus 0 -r 4 --iters 8 --tol 0 "$T/sample.amp"
    check_status "the CPU run to compare with: exit 0" 0
    cpu_fit=$(sed -n 's/^final fit: \([0-9.]*\).*/\1/p' "$RUN_OUT")
    run "$AMPED_RUN" --gpus 1 -r 4 --iters 8 --tol 0 "$T/sample.amp"
    check_status "--gpus 1, 8 iterations: exit 0" 0
    gpu_fit=$(sed -n 's/^final fit: \([0-9.]*\).*/\1/p' "$RUN_OUT")
    check_close "GPU fit $gpu_fit equals CPU fit $cpu_fit within 1e-6" \
        "$gpu_fit" "$cpu_fit"
    run "$AMPED_RUN" --gpus 1 --check -r 33 "$T/sample.amp"
    check_status "--gpus 1 --check: the GPU MTTKRP matches the reference" 0
    run "$AMPED_RUN" --gpus 1 --check --precision f32 -r 7 "$T/sample.amp"
    check_status "--gpus 1 --check --precision f32" 0
    run "$AMPED_RUN" --gpus 1 --mttkrp-only --iters 3 -r 16 "$T/sample.amp"
    check_status "--gpus 1 --mttkrp-only: exit 0" 0
    check_contains "--gpus 1 --mttkrp-only: on the GPU" "$RUN_OUT" "modes, on 1 GPU"
    run "$AMPED_RUN" --gpus 1 --device-memory 1K -o "$T/small" "$T/sample.amp"
    check_status "--device-memory below what even streaming needs exits 1" 1
    check_contains "... saying how much it needs" "$RUN_ERR" "of GPU memory even with the tensor streamed"
    check "... and writes no factors" test ! -e "$T/small.mode1.mat"
    run "$AMPED_RUN" --gpus 1 --memory resident --device-memory 33M -r 4 "$T/sample.amp"
    check_status "--memory resident that does not fit exits 1" 1
    check_contains "... and says auto would stream" "$RUN_ERR" "--memory auto streams it instead"
    run "$AMPED_RUN" --gpus 1 --memory stream --stream-chunk 4099 -r 4 --iters 8 --tol 0 "$T/sample.amp"
    check_status "--memory stream: exit 0" 0
    check_contains "--memory stream: the header says so" "$RUN_OUT" "tensor streamed from pinned host memory in chunks of 4099 nonzeros"
    check_not_contains "... and the nonzeros are read into host memory first" "$RUN_OUT" "straight to the GPU"
    stream_fit=$(sed -n 's/^final fit: \([0-9.]*\).*/\1/p' "$RUN_OUT")
    check_close "streamed fit $stream_fit equals CPU fit $cpu_fit within 1e-6" \
        "$stream_fit" "$cpu_fit"
    run "$AMPED_RUN" --gpus 1 --memory stream --stream-chunk 4099 --check -r 32 "$T/sample.amp"
    check_status "--memory stream --check: the streamed MTTKRP matches the reference" 0
    run "$AMPED_RUN" --gpus 1 --memory compressed -r 4 --iters 8 --tol 0 --json "$T/z.json" "$T/sample.amp"
    check_status "--memory compressed: exit 0" 0
    check_contains "--memory compressed: the header says so" "$RUN_OUT" "tensor streamed from its compressed chunks in host memory"
    check_contains "... and the JSON" "$T/z.json" '"memory": "compressed"'
    z_fit=$(sed -n 's/^final fit: \([0-9.]*\).*/\1/p' "$RUN_OUT")
    check_close "compressed-stream fit $z_fit equals CPU fit $cpu_fit within 1e-6" \
        "$z_fit" "$cpu_fit"
    run "$AMPED_RUN" --gpus 1 --memory compressed --check -r 32 "$T/sample.amp"
    check_status "--memory compressed --check: the MTTKRP matches the reference" 0
    # Two copies remapped: positions computed at load (no REMAP sections),
    # then read from them; the fits of every copy resident, --check, the
    # MTTKRP timed, and the report saying which and the sizes compared.
    run "$AMPED_PREP" -q --remap-streams -o "$T/sample-remap.amp" "$SAMPLE"
    check_status "the sample prepares with --remap-streams" 0
    for f in sample sample-remap; do
        run "$AMPED_RUN" --gpus 1 --memory remap -r 4 --iters 8 --tol 0 --json "$T/$f-m.json" \
            --report "$T/$f-m.html" "$T/$f.amp"
        check_status "--memory remap on $f.amp: exit 0" 0
        check_contains "--memory remap on $f.amp: the header says so" "$RUN_OUT" "tensor as two mode copies remapped each mode"
        check_contains "... and the sizes compared" "$RUN_OUT" "memory:    --memory remap: every copy resident needs"
        check_contains "... the remaps after the run" "$RUN_OUT" "copies written"
        check_contains "... the JSON" "$T/$f-m.json" '"memory": "remap"'
        check_contains "... the page" "$T/$f-m.html" "remap (--memory remap): tensor"
        r_fit=$(sed -n 's/^final fit: \([0-9.]*\).*/\1/p' "$RUN_OUT")
        check_close "--memory remap on $f.amp: fit $r_fit equals CPU fit $cpu_fit within 1e-6" \
            "$r_fit" "$cpu_fit"
    done
    check_contains "no REMAP sections: positions computed" "$T/sample-m.json" '"positions_from_file": 0'
    check_contains "REMAP sections: positions read, every mode" "$T/sample-remap-m.json" '"positions_from_file": 3'
    # auto with room for two copies remapped but not for every copy (f64
    # values: at 3 modes two remapped take 44 bytes a nonzero, every copy
    # 48): it remaps only a file that holds the positions, else streams.
    run "$AMPED_PREP" -q --values f64 -o "$T/s64.amp" "$SAMPLE"
    run "$AMPED_PREP" -q --values f64 --remap-streams -o "$T/s64r.amp" "$SAMPLE"
    run "$AMPED_RUN" --gpus 1 --memory remap -r 4 --iters 1 --json "$T/s64-plan.json" "$T/s64r.amp"
    res=$(sed -n 's/.*"plan": {[^}]*"resident": \([0-9]*\).*/\1/p' "$T/s64-plan.json")
    rem=$(sed -n 's/.*"plan": {[^}]*"remap": \([0-9]*\).*/\1/p' "$T/s64-plan.json")
    if [ -n "$res" ] && [ -n "$rem" ] && [ "$rem" -lt "$res" ]; then
        cap=$(( (res + rem) / 2 ))
        for f in s64r s64; do
            run "$AMPED_RUN" --gpus 1 --device-memory "$cap" -r 4 --iters 2 --json "$T/$f-auto.json" "$T/$f.amp"
            check_status "auto in $cap bytes (two remapped $rem, every copy $res) on $f.amp: exit 0" 0
        done
        check_contains "... with REMAP sections: two copies remapped" "$T/s64r-auto.json" '"memory": "remap"'
        check_contains "... without: streamed" "$T/s64-auto.json" '"memory": "stream"'
        check_contains "... and the report says why (s64.amp, the last run)" "$RUN_OUT" "(not for auto: the file has no REMAP sections"
        check_contains "... as the JSON does" "$T/s64-auto.json" '"remap_in_file": false'
    else
        for k in 1 2 3 4 5 6; do
            fail "auto between two remapped and every copy: no plan sizes in $T/s64-plan.json ($res, $rem)"
        done
    fi
    run "$AMPED_RUN" --gpus 1 --memory remap --check -r 32 "$T/sample.amp"
    check_status "--memory remap --check: the remapped copies' MTTKRP matches the reference" 0
    run "$AMPED_RUN" --gpus 1 --memory remap --mttkrp-only --iters 3 -r 16 "$T/sample.amp"
    check_status "--memory remap --mttkrp-only: exit 0" 0
    run "$AMPED_RUN" --gpus 1 --memory remap --device-memory 1K -r 4 "$T/sample.amp"
    check_status "--memory remap that does not fit exits 1" 1
    check_contains "... saying what it needs" "$RUN_ERR" "with two copies of the tensor remapped"
    run "$AMPED_RUN" --gpus 1 --memory stream --host-memory 1M -r 4 --iters 2 "$T/sample.amp"
    check_status "--memory stream with --host-memory too small: exit 0" 0
    check_contains "--memory stream with --host-memory too small: compressed chunks" "$RUN_OUT" "streamed from its compressed chunks"
    run "$AMPED_RUN" --gpus 1 --memory compressed -r 4 -o "$T/bad" "$T/bad.amp"
    check_status "--memory compressed on a corrupt file exits 1" 1
    check_contains "... naming the file" "$RUN_ERR" "$T/bad.amp"
    check "... leaving no factors" test ! -e "$T/bad.mode1.mat"
    run "$AMPED_RUN" --gpus 1 --memory stream -r 2 --iters 2 "$T/tiny.amp"
    check_status "--memory stream on a 5-nonzero tensor: exit 0" 0
    run "$AMPED_RUN" --gpus 1 -r 600 --iters 1 "$T/tiny.amp"
    check_status "--gpus 1 with a rank above 512 exits 1" 1
    check_contains "... naming the GPU's rank limit" "$RUN_ERR" "the GPU backend takes rank 1 to 512"
    run "$AMPED_RUN" -r 600 --iters 1 "$T/tiny.amp"
    check_status "a rank above 512 without --gpus: exit 0" 0
    check_contains "a rank above 512 without --gpus runs on the CPU" "$RUN_OUT" "backend:   cpu"
    run "$AMPED_RUN" --list-devices
    check_status "--list-devices (for the count): exit 0" 0
    ngpus=$(grep -c '^GPU ' "$RUN_OUT")
    run "$AMPED_RUN" --gpus $((ngpus + 1)) "$T/sample.amp"
    check_status "--gpus above the GPUs there are exits 1" 1
    check_contains "... listing them" "$RUN_ERR" "this machine has $ngpus GPU"
    run "$AMPED_RUN" --devices "$ngpus" "$T/sample.amp"
    check_status "--devices naming a GPU that is not there exits 1" 1
    check_contains "... listing the ones there are" "$RUN_ERR" "there is no GPU $ngpus; this machine has $ngpus"
    if [ "$ngpus" -ge 2 ]; then
        # Two GPUs: the same fit and factors as the CPU from the same seed,
        # whichever split and memory mode.
        run "$AMPED_RUN" --gpus 0 -r 4 --iters 8 --tol 0 -o "$T/cpu" "$T/sample.amp"
        check_status "the CPU run to compare 2 GPUs with: exit 0" 0
        run "$AMPED_RUN" --gpus 2 -r 4 --iters 8 --tol 0 -o "$T/two" --json "$T/two.json" "$T/sample.amp"
        check_status "--gpus 2: exit 0" 0
        check_contains "--gpus 2: the header says how the GPUs are joined" "$RUN_OUT" "backend:   2 GPUs joined with NCCL, partition shards"
        check_contains "--gpus 2: a table per GPU and mode" "$RUN_OUT" "  mode  gpu      nonzeros     mttkrp       busy       nccl   exchange       idle"
        two_fit=$(sed -n 's/^final fit: \([0-9.]*\).*/\1/p' "$RUN_OUT")
        check_close "2-GPU fit $two_fit equals CPU fit $cpu_fit within 1e-6" \
            "$two_fit" "$cpu_fit"
        # Same shape, every entry a number (a nan would drop out of the
        # largest difference), and within 1e-6 of the largest entry.
        for part in mode1 mode2 mode3 lambda; do
            check "2-GPU $part.mat equals the CPU's within 1e-6 (normwise)" \
                awk "$AWK_NUM"' FILENAME == ARGV[1] { for (i = 1; i <= NF; i++) { a[FNR ":" i] = $i; if (!num($i)) bad = 1 }
                                  n[FNR] = NF; rows = FNR; next }
                {  if (n[FNR] != NF) bad = 1; seen = FNR
                   for (i = 1; i <= NF; i++) { if (!num($i)) bad = 1; d = $i - a[FNR ":" i]; if (d < 0) d = -d; if (d > e) e = d; v = $i < 0 ? -$i : $i; if (v > s) s = v } }
                END { exit !(!bad && rows > 0 && seen == rows && s > 0 && e / s <= 1e-6) }' "$T/cpu.$part.mat" "$T/two.$part.mat"
        done
        check_contains "--gpus 2 --json: one entry per GPU" "$T/two.json" '"gpus": ['
        check_contains "--gpus 2 --json: the partition" "$T/two.json" '"partition": "shards"'
        for v in "--memory stream --stream-chunk 4099" "--partition equal-nnz" \
                 "--partition equal-nnz --memory stream --stream-chunk 4099" "--devices 1,0" \
                 "--overlap" "--overlap --memory stream --stream-chunk 4099" \
                 "--send-parts 3" "--send-parts 8 --precision f32" \
                 "--exchange copy" "--exchange copy --send-parts 2" "--exchange nccl" \
                 "--exchange auto --send-parts auto" \
                 "--exchange copy --send-parts 1" "--exchange nccl --send-parts 2" \
                 "--exchange copy --precision f32 --memory stream --stream-chunk 4099"; do
            run "$AMPED_RUN" --gpus 2 $v -r 4 --iters 8 --tol 0 "$T/sample.amp"
            check_status "2 GPUs, $v: exit 0" 0
            v_fit=$(sed -n 's/^final fit: \([0-9.]*\).*/\1/p' "$RUN_OUT")
            check_close "2 GPUs, $v: fit $v_fit equals the CPU's within 1e-6" \
                "$v_fit" "$cpu_fit"
        done
        run "$AMPED_RUN" --gpus 2 --send-parts 3 -r 4 --iters 3 --json "$T/parts.json" "$T/sample.amp"
        check_status "--send-parts 3: exit 0" 0
        check_contains "--send-parts 3: the report says the rows went in 3 parts" "$RUN_OUT" \
            "rows sent in 3 parts, each once solved"
        check_contains "--send-parts 3 --json: send_parts" "$T/parts.json" '"send_parts": [3, 3, 3]'
        run "$AMPED_RUN" --gpus 2 --exchange nccl -r 4 --iters 3 --json "$T/whole.json" "$T/sample.amp"
        check_status "--gpus 2 --exchange nccl: exit 0" 0
        check_contains "--exchange nccl: each mode's rows sent whole by default" "$T/whole.json" \
            '"send_parts": [1, 1, 1]'
        check_contains "... by NCCL" "$T/whole.json" '"row_exchange": "nccl"'
        check_not_contains "... which the header does not call copies" "$RUN_OUT" "copy engines"
        # The default: by copies where the GPUs have peer access (what
        # --list-devices says of the run's two GPUs alone), then in 2
        # parts; else by NCCL, whole.
        two=$(echo "${CUDA_VISIBLE_DEVICES:-0,1}" | cut -d, -f1,2)
        if CUDA_VISIBLE_DEVICES=$two "$AMPED_RUN" --list-devices |
            grep -q '^peer access: between every pair'; then
            how=copy parts='[2, 2, 2]'
        else
            how=nccl parts='[1, 1, 1]'
        fi
        run env CUDA_VISIBLE_DEVICES="$two" "$AMPED_RUN" --gpus 2 -r 4 --iters 3 \
            --json "$T/auto.json" "$T/sample.amp"
        check_status "--gpus 2, the default exchange: exit 0" 0
        check_contains "the default exchange: by $how, as --list-devices's peer access says" "$T/auto.json" \
            "\"row_exchange\": \"$how\""
        check_contains "... in the parts that go with it, $parts" "$T/auto.json" "\"send_parts\": $parts"
        run "$AMPED_RUN" --gpus 2 --exchange copy -r 4 --iters 3 --json "$T/copy.json" "$T/sample.amp"
        check_status "--exchange copy: exit 0" 0
        check_contains "--exchange copy: the report says so" "$RUN_OUT" "rows sent by copy engines"
        check_contains "--exchange copy --json: row_exchange" "$T/copy.json" '"row_exchange": "copy"'
        for v in "-r 33" "--memory stream --stream-chunk 4099 -r 32" "--partition equal-nnz -r 7 --precision f32"; do
            run "$AMPED_RUN" --gpus 2 --check $v "$T/sample.amp"
            check_status "--gpus 2 --check $v: the GPUs' MTTKRP matches the reference" 0
        done
        run "$AMPED_RUN" --gpus 2 --memory compressed -r 4 "$T/sample.amp"
        check_status "--gpus 2 --memory compressed is refused" 1
        check_contains "... saying it streams to one GPU" "$RUN_ERR" "--memory compressed streams to one GPU"
        run "$AMPED_RUN" --gpus 2 --mttkrp-only --iters 3 -r 16 "$T/sample.amp"
        check_status "--gpus 2 --mttkrp-only: exit 0" 0
        check_contains "--gpus 2 --mttkrp-only: on both GPUs" "$RUN_OUT" "modes, on 2 GPUs"
        # (Its own CPU fit: the starting factors follow the file's relabelling.)
        run "$AMPED_PREP" -q --shards 1 -o "$T/one-shard.amp" "$SAMPLE"
        check_status "--shards 1 prepares" 0
        run "$AMPED_RUN" --gpus 0 -r 4 --iters 8 --tol 0 "$T/one-shard.amp"
        check_status "the CPU on the one-shard file: exit 0" 0
        one_cpu=$(sed -n 's/^final fit: \([0-9.]*\).*/\1/p' "$RUN_OUT")
        run "$AMPED_RUN" --gpus 2 -r 4 --iters 8 --tol 0 "$T/one-shard.amp"
        check_status "a file with one shard a mode runs on 2 GPUs" 0
        check_contains "... and says a GPU idles" "$RUN_OUT" "gpu 1 has no nonzeros of mode 1"
        one_fit=$(sed -n 's/^final fit: \([0-9.]*\).*/\1/p' "$RUN_OUT")
        check_close "... with the CPU's fit on that file ($one_fit, $one_cpu)" \
            "$one_fit" "$one_cpu"
    else
        skip "two GPUs against the CPU" "fewer than two GPUs"
    fi
else
    run "$AMPED_RUN" --gpus 1 -o "$T/nogpu" "$T/sample.amp"
    check_status "--gpus 1 without a GPU exits 1" 1
    check_contains "... and says --gpus 0 runs on the CPU" "$RUN_ERR" "--gpus 0 runs on the CPU"
    check "... and writes no factors" test ! -e "$T/nogpu.mode1.mat"
    skip "the GPU backend against the CPU" "no GPU"
fi

done_testing
