#!/usr/bin/env bash
# Two builds of amped, the same results: for a refactor that must change
# nothing. Every tensor given is prepared by both builds' amped-prep (the
# .amp files compared byte for byte, at each AMP_PREP_ARGS setting), then
# decomposed by both builds' amped-run from the same seed with each
# AMP_RUN_ARGS setting (backend, precision, memory); the fit of every
# iteration, as printed (10 decimals), must be the same.
#
#   bench/same-results.sh OLD_BUILD NEW_BUILD TENSOR...
#
# OLD_BUILD and NEW_BUILD are build directories (with amped-prep and
# amped-run). AMP_PREP_ARGS: ';'-separated amped-prep option sets (default
# "-t 1;-t 3;-t 3 --level 0;-t 3 --remap-streams"); AMP_RUN_ARGS: likewise
# for amped-run (default "--gpus 0 -t 2;--gpus 0 -t 2 --precision f32");
# AMP_RANK (8), AMP_ITERS (10). Prints one line per comparison and the
# counts; exits 1 if any differs.
set -uo pipefail
if [ $# -lt 3 ]; then
    echo "usage: $0 OLD_BUILD NEW_BUILD TENSOR..." >&2
    exit 2
fi
old=$1 new=$2
shift 2
IFS=';' read -r -a prep_sets <<<"${AMP_PREP_ARGS:--t 1;-t 3;-t 3 --level 0;-t 3 --remap-streams}"
IFS=';' read -r -a run_sets <<<"${AMP_RUN_ARGS:---gpus 0 -t 2;--gpus 0 -t 2 --precision f32}"
rank=${AMP_RANK:-8}
iters=${AMP_ITERS:-10}
work=$(mktemp -d "${TMPDIR:-/tmp}/same-results.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
same=0 differ=0

verdict() {   # what, 0 when the same
    if [ "$2" -eq 0 ]; then
        same=$((same + 1))
        echo "same    $1"
    else
        differ=$((differ + 1))
        echo "DIFFERS $1"
    fi
}

# The fit column of the iteration lines.
fits() {
    awk '/^ *[0-9]+  [0-9.]+  / { print $1, $2 }' "$1"
}

for tensor in "$@"; do
    name=$(basename "$tensor")
    for p in "${prep_sets[@]}"; do
        # shellcheck disable=SC2086
        "$old/amped-prep" -q -f $p -o "$work/old.amp" "$tensor" &&
            "$new/amped-prep" -q -f $p -o "$work/new.amp" "$tensor"
        rc=$?
        [ $rc -eq 0 ] && { cmp -s "$work/old.amp" "$work/new.amp"; rc=$?; }
        verdict "$name: amped-prep $p: .amp bytes" $rc
    done
    "$new/amped-prep" -q -f -o "$work/t.amp" "$tensor" || { verdict "$name: prepare" 1; continue; }
    for r in "${run_sets[@]}"; do
        # shellcheck disable=SC2086
        "$old/amped-run" $r -r "$rank" --iters "$iters" --tol 0 --seed 7 "$work/t.amp" \
            >"$work/old.out" 2>"$work/old.err" &&
            "$new/amped-run" $r -r "$rank" --iters "$iters" --tol 0 --seed 7 "$work/t.amp" \
                >"$work/new.out" 2>"$work/new.err"
        rc=$?
        if [ $rc -eq 0 ]; then
            fits "$work/old.out" >"$work/old.fit"
            fits "$work/new.out" >"$work/new.fit"
            n=$(wc -l <"$work/new.fit")
            [ "$n" -eq "$iters" ] && cmp -s "$work/old.fit" "$work/new.fit"
            rc=$?
        else
            cat "$work/old.err" "$work/new.err" >&2
        fi
        verdict "$name: amped-run $r: fits of $iters iterations ($(tail -n 1 "$work/new.fit" 2>/dev/null))" $rc
    done
done
echo "$same same, $differ differ"
[ "$differ" -eq 0 ]
