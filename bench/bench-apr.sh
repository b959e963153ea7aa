#!/bin/sh
# Poisson CP (CP-APR) on the CPU backend against pyttb's cp_apr (issue 42):
# seconds per outer iteration on the count tensors of ../shared/data at
# rank AMP_RANK (16), AMP_ITERS (5) outer iterations from the same start,
# pyttb's shift rule so that both compute the same iterates, on AMP_THREADS
# threads (2); the same log-likelihood is printed beside. Run from the
# build directory; python from AMP_PYTHON (python3), with pyttb.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
need_built "$prep" "$run"
py=${AMP_PYTHON:-python3}
"$py" -c 'import pyttb' 2>/dev/null || { echo "bench-apr: needs pyttb in $py (AMP_PYTHON)" >&2; exit 1; }
shared=${AMP_TEST_DATA:-$src/../shared/data}
rank=${AMP_RANK:-16} iters=${AMP_ITERS:-5} threads=${AMP_THREADS:-2}
echo "| tensor | rank | outer iterations | pyttb s/iter | amped s/iter | ratio | pyttb loglik | amped loglik | rel. diff |"
echo "|---|---|---|---|---|---|---|---|---|"
for t in splatt-med; do   # counts 1 to 5, no empty slice (pyttb keeps those rows)
    tns=$shared/$t.tns
    [ -f "$tns" ] || continue
    "$prep" -q -f -o "$data/$t.amp" "$tns" || exit 1
    "$py" "$here/apr-pyttb.py" "$run" "$tns" "$data/$t.amp" "$rank" "$iters" "$threads" "$data" || exit 1
done
