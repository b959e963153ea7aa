#!/bin/sh
# The boundaries between the libraries, read from the #include lines: a
# folder may include its own headers and those of the folders it builds on,
# never a sibling's. The build enforces the same through each library's
# include path (Makefile.am); this test also catches a header reached by a
# relative path ("../cpu/amp_cpu.h") or a library given a wider path.
#
#   common     <- nothing else
#   format     <- common
#   prep       <- format, common
#   run/core   <- format, common
#   run/cpu    <- run/core, format, common
#   run/comm   <- common
#   run/mpi    <- run/core, common (format through run/core's header)
#   run/cuda   <- run/core, run/comm, format, common
#   run        <- every run/ library, format, common (not prep)
#   lib        <- everything: libamped is the whole of amped behind amped.h
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

cd "$top_srcdir" || exit 1

allowed() {   # folder -> the folders it may include from, itself first
    case $1 in
    common) echo common ;;
    format) echo format common ;;
    prep) echo prep format common ;;
    run/core) echo run/core format common ;;
    run/cpu) echo run/cpu run/core format common ;;
    run/comm) echo run/comm common ;;
    run/mpi) echo run/mpi run/core format common ;;
    run/cuda) echo run/cuda run/core run/comm format common ;;
    run) echo run run/core run/cpu run/cuda run/comm run/mpi format common ;;
    lib) echo lib run run/core run/cpu run/cuda run/comm run/mpi prep format common ;;
    esac
}

# Where a header lives: the folder (of those above) holding a file of that
# name, "" when none does (a system header or config.h).
home_of() {
    for dir in common format prep run/core run/cpu run/comm run/cuda run/mpi run lib; do
        if test -f "$dir/$1"; then
            echo "$dir"
            return
        fi
    done
}

# The includes of files (as seen from folder) that break its boundary.
violations() {   # folder file...
    _folder=$1
    shift
    for _f in "$@"; do
        for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$_f"); do
            case $inc in
            */*) printf ' %s' "$_f:$inc(a path)"; continue ;;
            esac
            home=$(home_of "$inc")
            test -n "$home" || continue
            ok=
            for a in $(allowed "$_folder"); do
                test "$a" = "$home" && ok=1
            done
            test -n "$ok" || printf ' %s' "$_f:$inc(from $home)"
        done
    done
}

for folder in common format prep run/core run/cpu run/comm run/cuda run/mpi run lib; do
    set --
    for f in "$folder"/*.c "$folder"/*.h "$folder"/*.cu "$folder"/*.cuh; do
        test -f "$f" && set -- "$@" "$f"
    done
    nfiles=$#
    bad=$(violations "$folder" "$@")
    if test "$nfiles" -gt 0 && test -z "$bad"; then
        pass "$folder: $nfiles files include only from: $(allowed "$folder")"
    else
        fail "$folder: $nfiles files; includes outside its boundary:$bad"
    fi
done

# The check must see a violation when there is one: a run/cuda file naming
# the CPU backend's header, or reaching a header by a path.
printf '#include <stdio.h>\n#include "amp_core.h"\n#include "amp_cpu.h"\n' >"$T/probe.cu"
is "a run/cpu header in run/cuda is refused" "$(violations run/cuda "$T/probe.cu")" \
    " $T/probe.cu:amp_cpu.h(from run/cpu)"
printf '#include "../cpu/amp_cpu.h"\n' >"$T/probe.c"
is "a header reached by a path is refused" "$(violations run/cuda "$T/probe.c")" \
    " $T/probe.c:../cpu/amp_cpu.h(a path)"
printf '#include "amped_format.h"\n' >"$T/probe.c"
is "format/ is within run/core's boundary" "$(violations run/core "$T/probe.c")" ""

# ---- every program an in-tree build makes is ignored by git ---------------------
# Makefile.am's *_PROGRAMS (continuation lines joined, amp_test_programs
# expanded): a build in the source tree must leave git status clean.
if git -C "$top_srcdir" rev-parse --git-dir >/dev/null 2>&1; then
    progs=$(awk '{ line = line $0 } /\\$/ { sub(/\\$/, "", line); next }
                 { print line; line = "" }' Makefile.am |
            awk '/^amp_test_programs *=/ { sub(/^[^=]*= */, ""); tp = $0 }
                 /^(bin|noinst|check)_PROGRAMS *\+?=/ { sub(/^[^=]*= */, ""); p = p " " $0 }
                 END { gsub(/\$\(amp_test_programs\)/, tp, p); print p }')
    missing=
    for p in $progs; do
        git -C "$top_srcdir" check-ignore -q "$p" || missing="$missing $p"
    done
    is "git ignores every program an in-tree build makes" "${missing# }" ""
    test -n "$progs" || fail "Makefile.am names programs"
else
    skip "git ignores every program an in-tree build makes" "not a git checkout"
fi

done_testing
