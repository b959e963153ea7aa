#!/bin/sh
# The HTML reports (amped-run --report, amped-prep --report) and the
# ktensor factor file (amped-run --format ktensor): each page well-formed
# XML, self-contained, with every chart, and its numbers those of the
# JSON report, of the tensor itself and of amped-run --info
# (tests/report_check.py); the pages created before any work; the ktensor
# file's layout, its numbers those of the text factors, and pyttb reading
# it where pyttb is installed (AMP_TEST_PYTHON names a python that has it).
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

need_program "$AMPED_PREP"
need_program "$AMPED_RUN"
need_program "$AMPED_GEN"
CHECK=$top_srcdir/tests/report_check.py
PY=
command -v python3 >/dev/null 2>&1 && PY=python3
NOPY="no python3 to read the page"

zstd -qdc "$top_srcdir/data/sample.tns.zst" > "$T/s.tns" ||
    { echo "Bail out! zstd failed"; exit 1; }
# A skewed tensor, so that shards and slice degrees differ.
"$AMPED_GEN" -o "$T/g.tns" --nnz 20000 --dims 300,2000,50 --seed 3 >/dev/null ||
    { echo "Bail out! amped-gen failed"; exit 1; }

# well_formed PAGE: xmllint where installed (libxml2-utils), else python3's
# parser, which report_check.py runs anyway.
well_formed() {
    if command -v xmllint >/dev/null 2>&1; then
        check "$1: well-formed XML (xmllint)" xmllint --noout "$1"
    else
        skip "$1: well-formed XML (xmllint)" "no xmllint (Debian: libxml2-utils)"
    fi
}

# checked WHAT ARGS...: report_check.py's verdict, its failures shown.
checked() {
    _what=$1
    shift
    if test -z "$PY"; then
        skip "$_what" "$NOPY"
        return
    fi
    run "$PY" "$CHECK" "$@"
    if test "$RUN_RC" = 0; then
        pass "$_what"
    else
        fail "$_what"
        diag_file "report_check.py" "$RUN_OUT"
    fi
}

# ---- amped-prep --report --------------------------------------------------------
run "$AMPED_PREP" -q --report "$T/prep.html" -o "$T/s.amp" "$T/s.tns"
check_status "amped-prep --report exits 0" 0
well_formed "$T/prep.html"
run "$AMPED_RUN" --info "$T/s.amp"
cp "$RUN_OUT" "$T/s.info"
checked "amped-prep --report: degrees as the tensor has them, shards as --info reads them" \
    prep "$T/prep.html" "$T/s.tns" "$T/s.info"
for shards in 7 3000; do
    run "$AMPED_PREP" -q --shards $shards --report "$T/g$shards.html" -o "$T/g$shards.amp" "$T/g.tns"
    check_status "amped-gen's tensor, --shards $shards: exits 0" 0
    run "$AMPED_RUN" --info "$T/g$shards.amp"
    cp "$RUN_OUT" "$T/g$shards.info"
    checked "--shards $shards: the degrees and shards (the fullest 1024 above that)" \
        prep "$T/g$shards.html" "$T/g.tns" "$T/g$shards.info"
done
run "$AMPED_PREP" --stats --report "$T/stats.html" "$T/g.tns"
check_status "amped-prep --stats --report exits 0" 0
checked "--stats: the degrees, and no shard chart" prep "$T/stats.html" "$T/g.tns"
run "$AMPED_PREP" -q --report "$T/prep.html" -o "$T/s2.amp" "$T/s.tns"
check_status "an existing --report without --force exits 1" 1
check_contains "... and says so" "$RUN_ERR" "prep.html: already exists; use --force"
check "... before writing the .amp" test ! -e "$T/s2.amp"
run "$AMPED_PREP" -q --report "$T/missing/p.html" -o "$T/s3.amp" "$T/s.tns"
check_status "--report into a missing directory exits 1" 1
check_contains "... naming the file" "$RUN_ERR" "$T/missing/p.html"
check "... with nothing written" test ! -e "$T/s3.amp"
run "$AMPED_PREP" -q --report "$T/same.amp" -o "$T/same.amp" "$T/s.tns"
check_status "--report naming the -o file: a usage error" 2
check_contains "... that says so" "$RUN_ERR" "the same file as -o"
check "... with nothing written" test ! -e "$T/same.amp"
# The same file under another spelling: refused as well, the paths
# resolved, before anything is read or written.
run "$AMPED_PREP" -q --report "$T/./twice.amp" -o "$T/twice.amp" "$T/s.tns"
check_status "--report reaching the -o file by another path: a usage error" 2
check_contains "... that says so" "$RUN_ERR" "the same file as -o"
check "... with nothing written" test ! -e "$T/twice.amp"

# ---- amped-run --report -----------------------------------------------------------
run "$AMPED_RUN" -r 6 --tol 0 --iters 9 --json "$T/run.json" --report "$T/run.html" "$T/s.amp"
check_status "amped-run --report exits 0" 0
well_formed "$T/run.html"
checked "amped-run --report: every chart, the numbers of --json" run "$T/run.html" "$T/run.json"
run "$AMPED_RUN" -q --method hals -r 4 --iters 5 --json "$T/h.json" --report "$T/h.html" "$T/g7.amp"
check_status "--method hals --report exits 0" 0
checked "HALS: its phases (update, not solve) as the JSON has them" run "$T/h.html" "$T/h.json"
if test -n "$PY"; then
    # The checker itself must catch a page that is wrong: one fit changed.
    sed 's/\(data-y="\)0\.000[0-9]*/\10.5/' "$T/run.html" > "$T/bad.html"
    run "$PY" "$CHECK" run "$T/bad.html" "$T/run.json"
    # Rejected for that fit: a checker that fails for any reason (a
    # traceback, exit 1) would pass a bare exit-status check.
    check "the checker rejects a page with a fit changed" \
        sh -c 'test "$1" != 0 && grep -q "^FAIL fit per iteration" "$2"' sh "$RUN_RC" "$RUN_OUT"
    printf '<html><body><p>open</body></html>\n' > "$T/bad.html"
    run "$PY" "$CHECK" run "$T/bad.html" "$T/run.json"
    check_contains "... and one that is not well-formed" "$RUN_OUT" "not well-formed XML"
else
    skip "the checker rejects a wrong page" "$NOPY"
    skip "... and one that is not well-formed" "$NOPY"
fi
run "$AMPED_RUN" -r 8 --tol 0 --iters 1000 --report "$T/missing/r.html" "$T/s.amp"
check_status "--report into a missing directory exits 1" 1
check_contains "... naming the file" "$RUN_ERR" "$T/missing/r.html"
check_empty "... before any work (nothing on stdout)" "$RUN_OUT"
mkdir "$T/dir"
run "$AMPED_RUN" --report "$T/dir" "$T/s.amp"
check_status "--report DIR: a usage error" 2
check_contains "... that says it is a directory" "$RUN_ERR" "is a directory"
run "$AMPED_RUN" --mttkrp-only --report "$T/m.html" "$T/s.amp"
check_status "--report with --mttkrp-only: a usage error" 2
if "$AMPED_RUN" -V | grep -q '^MPI: yes' && command -v mpirun >/dev/null 2>&1; then
    # OpenMPI's own allocations live to the end: leaks of MPI, not of amped
    # (the sanitizer build), as in run_mpi.sh.
    run env ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
        mpirun --allow-run-as-root --oversubscribe -np 2 "$AMPED_RUN" --gpus 0 -t 1 -q -r 4 \
        --iters 4 --json "$T/mpi.json" --report "$T/mpi.html" "$T/g7.amp"
    check_status "under mpirun -np 2, --report exits 0" 0
    checked "a row per process, as the JSON has them" run "$T/mpi.html" "$T/mpi.json"
else
    skip "under mpirun -np 2, --report exits 0" "no MPI in this build, or no mpirun"
    skip "a row per process" "no MPI in this build, or no mpirun"
fi

# ---- --format ktensor -------------------------------------------------------------
run "$AMPED_RUN" -q -t 1 -r 5 --iters 6 -o "$T/k" --format ktensor "$T/g7.amp"
check_status "--format ktensor exits 0" 0
check "... writes PREFIX.ktn alone" test -f "$T/k.ktn" -a ! -e "$T/k.mode1.mat"
check_first_line_starts "... which begins 'ktensor'" "$T/k.ktn" ktensor
# The layout from the file's own header: 5 lines, then 3 and a row per
# index for each mode, the rank's values on each.
run awk 'NR == 2 { n = $1 } NR == 3 { for (m = 1; m <= NF; m++) d[m] = $m; lines = 5
                                      for (m = 1; m <= NF; m++) lines += 3 + d[m] }
         NR == 4 { r = $1 } NR == 5 && NF != r { bad = "weights" }
         $0 == "matrix" { k++; if (getline != 1 || $0 != "2" || getline != 1 ||
                                   $0 != d[k] " " r) bad = "matrix " k; next }
         NR > 5 && NF != r { bad = "line " NR }
         END { if (bad == "" && (NR == 0 || NR != lines || k != n)) bad = "lines " NR " of " lines
               print bad == "" ? "layout ok" : "bad " bad }' "$T/k.ktn"
check_contains "... laid out as pyttb's export_data writes one" "$RUN_OUT" "layout ok"
run "$AMPED_RUN" -q -t 1 -r 5 --iters 6 -o "$T/k" "$T/g7.amp"
checked "... the same numbers as the text factors" ktensor "$T/k.ktn" "$T/k"
run "$AMPED_RUN" -r 5 -o "$T/k" --format ktensor --rows nonempty "$T/g7.amp"
check_status "--format ktensor --rows nonempty: a usage error" 2
PYTTB=${AMP_TEST_PYTHON:-$PY}
if test -n "$PYTTB" && "$PYTTB" -c 'import pyttb' >/dev/null 2>&1; then
    run "$PYTTB" -c '
import sys, numpy as np, pyttb as ttb
k = ttb.import_data(sys.argv[1])
lam = np.loadtxt(sys.argv[2] + ".lambda.mat")
ok = np.array_equal(k.weights, lam) and all(
    np.array_equal(k.factor_matrices[m], np.loadtxt("%s.mode%d.mat" % (sys.argv[2], m + 1)))
    for m in range(3))
print("pyttb reads it" if ok else "pyttb differs")' "$T/k.ktn" "$T/k"
    check_contains "pyttb.import_data reads it, the same numbers" "$RUN_OUT" "pyttb reads it"
elif test "${CI:-}" = true; then
    fail "pyttb.import_data reads it: no pyttb in ${PYTTB:-python3} (CI=true needs it: .ci/run sets AMP_TEST_PYTHON)"
else
    skip "pyttb.import_data reads it" "no pyttb (AMP_TEST_PYTHON=python with pyttb to run it)"
fi

done_testing
