#!/bin/sh
# amped-prep's command line: help, version, usage errors and their exit
# statuses, conversions through -o, -q, standard input, --index-base, --dims,
# threads, and the progress bars on a terminal.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

need_program "$AMPED_PREP"

TRY="Try 'amped-prep --help' for more information."
version=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' "$top_builddir/config.h")

# A small 1-based tensor: 3 modes, dims 3 x 4 x 5, 6 nonzeros, one comment.
cat >"$T/small.tns" <<'EOF'
# a small tensor
1 1 1 1.5
1 2 3 -2
2 4 5 0.25
3 1 2 1e-3
3 3 3 4
2 2 1 7
EOF
# The same entries 0-based.
cat >"$T/zero.tns" <<'EOF'
0 0 0 1.5
0 1 2 -2
1 3 4 0.25
2 0 1 1e-3
2 2 2 4
1 1 0 7
EOF
# One coordinate repeated.
printf '1 1 1 1\n2 2 2 2\n1 1 1 3\n' >"$T/dup.tns"
# A bad line 3.
printf '1 1 1 1\n2 2 2 2\n2 x 2 2\n' >"$T/bad.tns"

# ---- --help and --version -------------------------------------------------
for opt in --help -h; do
    run "$AMPED_PREP" --stats $opt
    check_status "$opt exits 0" 0
    check_contains "$opt prints the usage on stdout" "$RUN_OUT" "Usage: amped-prep [OPTION]... INPUT"
    check_empty "$opt prints nothing on stderr" "$RUN_ERR"
done
run "$AMPED_PREP" --help
check_status "--help (again) exits 0" 0
check_contains "--help shows the --duplicates default" "$RUN_OUT" "(default: sum)"
check_contains "--help shows the --index-base default" "$RUN_OUT" "(default: auto"
RUN_CMD="OMP_NUM_THREADS=3 $AMPED_PREP --help"
OMP_NUM_THREADS=3 "$AMPED_PREP" --help >"$RUN_OUT" 2>"$RUN_ERR"
RUN_RC=$?
check_status "OMP_NUM_THREADS=3 --help exits 0" 0
check_contains "--help shows the --threads default (OMP_NUM_THREADS=3)" "$RUN_OUT" "(default: 3, all available)"
check_contains "--help documents the exit statuses" "$RUN_OUT" "Exit status: 0 on success, 1 on a failure, 2 on a usage error."
for opt in --input-format --index-base --dims --duplicates --output --threads --quiet --verbose --version; do
    check_contains "--help lists $opt" "$RUN_OUT" "$opt"
done

run "$AMPED_PREP" --version
check_status "--version exits 0" 0
is "--version prints name and version" "$(head -n 1 "$RUN_OUT")" "amped-prep (amped) $version"
check_empty "--version prints nothing on stderr" "$RUN_ERR"

# ---- usage errors: exit 2, a message naming the problem, then the hint ----
run "$AMPED_PREP" --stats --bogus-option "$T/small.tns"
check_status "unknown option exits 2" 2
check_contains "unknown option is named" "$RUN_ERR" "--bogus-option"
check_first_line_starts "unknown option: the message starts with 'amped-prep: ' (not the path run)" "$RUN_ERR" "amped-prep: "
check_last_line "unknown option: stderr ends with the --help hint" "$RUN_ERR" "$TRY"
check_empty "unknown option: nothing on stdout" "$RUN_OUT"

run "$AMPED_PREP" --stats -Z "$T/small.tns"
check_status "unknown short option exits 2" 2
check_last_line "unknown short option: stderr ends with the --help hint" "$RUN_ERR" "$TRY"

run "$AMPED_PREP" --stats --threads
check_status "option without its argument exits 2" 2
check_last_line "option without argument: stderr ends with the --help hint" "$RUN_ERR" "$TRY"

# An option and a bad value for it, one per line.
while read -r opt value; do
    run "$AMPED_PREP" --stats "$opt" "$value" "$T/small.tns"
    check_status "$opt $value exits 2" 2
    check_contains "$opt $value: the message names the option" "$RUN_ERR" "for $opt"
    check_contains "$opt $value: the message quotes the value" "$RUN_ERR" "'$value'"
    check_last_line "$opt $value: stderr ends with the --help hint" "$RUN_ERR" "$TRY"
    check_empty "$opt $value: nothing on stdout" "$RUN_OUT"
done <<'EOF'
--threads 0
--threads abc
--threads -1
--threads 99999
--index-base 2
--index-base one
--duplicates foo
--input-format xml
--dims 0,1
--dims 3,,4
--dims 3,4,
--dims -3,4
--dims 9223372036854775808,2
EOF
run "$AMPED_PREP" --stats --threads=0 "$T/small.tns"
check_status "--threads=0 (joined form) exits 2" 2
check_contains "--threads=0: the message names the option" "$RUN_ERR" "--threads"

run "$AMPED_PREP" --stats
check_status "missing INPUT exits 2" 2
check_contains "missing INPUT is explained" "$RUN_ERR" "missing INPUT"
check_last_line "missing INPUT: stderr ends with the --help hint" "$RUN_ERR" "$TRY"

run "$AMPED_PREP" --stats "$T/small.tns" "$T/zero.tns"
check_status "two operands exit 2" 2
check_contains "the extra operand is named" "$RUN_ERR" "$T/zero.tns"
check_last_line "two operands: stderr ends with the --help hint" "$RUN_ERR" "$TRY"

run "$AMPED_PREP" --stats "$T/no-such-file.tns"
check_status "nonexistent input exits 1" 1
check_contains "nonexistent input: the message names the file" "$RUN_ERR" "$T/no-such-file.tns"
check_empty "nonexistent input: nothing on stdout" "$RUN_OUT"
check_not_contains "nonexistent input is not a usage error" "$RUN_ERR" "$TRY"

run "$AMPED_PREP" --stats "$T"
check_status "a directory as input exits 1" 1
check_contains "a directory as input: the message names it" "$RUN_ERR" "$T"

mkdir "$T/out"
run "$AMPED_PREP" -o "$T/out/x.txt" "$T/small.tns"
check_status "-o with an unknown extension exits 2" 2
check_contains "-o with an unknown extension: the name is quoted" "$RUN_ERR" "'$T/out/x.txt'"
check_last_line "-o with an unknown extension: stderr ends with the --help hint" "$RUN_ERR" "$TRY"
run "$AMPED_PREP" -o "$T/out/x.tns.gz" "$T/small.tns"
check_status "-o to .tns.gz (no compressed output) exits 2" 2
ls -A "$T/out" >"$T/ls.txt"
check_empty "-o with a bad extension creates nothing" "$T/ls.txt"

# ---- statistics of the small tensor --------------------------------------
run "$AMPED_PREP" --stats "$T/small.tns"
check_status "reading a small tensor exits 0" 0
cp "$RUN_OUT" "$T/small.out"
check_contains "small: input line" "$RUN_OUT" "input:      $T/small.tns (FROSTT text, "
check_contains "small: 1-based detected" "$RUN_OUT" "1-based)"
check_contains "small: modes" "$RUN_OUT" "modes:      3"
check_contains "small: dims are the largest indices" "$RUN_OUT" "dims:       3 x 4 x 5"
check_contains "small: nonzeros" "$RUN_OUT" "nonzeros:   6"
check_contains "small: duplicates" "$RUN_OUT" "duplicates: 0"
check_contains "small: values" "$RUN_OUT" "values:     min -2, max 7, norm 8.44467,"
check_contains "small: mode 1 slices" "$RUN_OUT" "mode 1      3 slices, 3 non-empty, largest holds 2 nonzeros"
check_empty "small: nothing on stderr" "$RUN_ERR"

# ---- conversion round trip .tns -> .bin -> .tns --------------------------
run "$AMPED_PREP" -o "$T/out/a.bin" "$T/small.tns"
check_status "-o a.bin exits 0" 0
check "-o a.bin writes the file" test -s "$T/out/a.bin"
stats_of "$RUN_OUT" >"$T/s0"
run "$AMPED_PREP" --stats "$T/out/a.bin"
check_status "reading the written .bin exits 0" 0
check_contains "the .bin is read as FROSTT binary" "$RUN_OUT" "(FROSTT binary, "
stats_of "$RUN_OUT" >"$T/s1"
check_same_stats ".tns and its .bin have the same statistics" "$T/s0" "$T/s1"
run "$AMPED_PREP" -o "$T/out/b.tns" "$T/out/a.bin"
check_status ".bin -> .tns exits 0" 0
run "$AMPED_PREP" --stats "$T/out/b.tns"
check_status "reading the written .tns exits 0" 0
stats_of "$RUN_OUT" >"$T/s2"
check_same_stats ".tns -> .bin -> .tns keeps the statistics" "$T/s0" "$T/s2"
run "$AMPED_PREP" -o "$T/out/c.tns" "$T/out/b.tns"
check_status ".tns -> .tns exits 0" 0
check_same "writing .tns is stable (second generation identical)" "$T/out/b.tns" "$T/out/c.tns"
run "$AMPED_PREP" -o "$T/out/c.bin" "$T/out/b.tns"
check_status ".tns -> .bin exits 0" 0
check_same "writing .bin is stable (second generation identical)" "$T/out/a.bin" "$T/out/c.bin"
run "$AMPED_PREP" --output="$T/out/d.bin" "$T/small.tns"
check_status "--output= exits 0" 0
check_same "--output= is the same as -o" "$T/out/a.bin" "$T/out/d.bin"
ls "$T/out" | grep '\.tmp\.' >"$T/leftover" 2>&1
check_empty "successful conversions leave no temporary files" "$T/leftover"

# -o over an existing file: refused, unless --force.
printf 'old\n' >"$T/out/e.tns"
run "$AMPED_PREP" -q -o "$T/out/e.tns" "$T/small.tns"
check_status "-o over an existing file exits 1" 1
check_contains "and says to use --force" "$RUN_ERR" "already exists; use --force"
is "the existing file is untouched" "$(cat "$T/out/e.tns")" "old"
run "$AMPED_PREP" -q --force -o "$T/out/e.tns" "$T/small.tns"
check_status "-o --force over an existing file exits 0" 0
check_same "--force replaces an existing file" "$T/out/b.tns" "$T/out/e.tns"

# Without -o: INPUT's name with .amp, beside it.
mkdir "$T/dflt"
cp "$T/small.tns" "$T/dflt/t.tns"
run "$AMPED_PREP" -q "$T/dflt/t.tns"
check_status "no -o writes the .amp beside the input" 0
check "it is named t.amp" test -f "$T/dflt/t.amp"
gzip -c "$T/small.tns" >"$T/dflt/z.tns.gz"
run "$AMPED_PREP" -q "$T/dflt/z.tns.gz"
check_status "no -o on a .tns.gz exits 0" 0
check "z.tns.gz gives z.amp" test -f "$T/dflt/z.amp"
run "$AMPED_PREP" -q "$T/dflt/t.tns"
check_status "a second run does not overwrite it" 1
run_stdin "$T/small.tns" "$AMPED_PREP" -q -
check_status "standard input without -o is a usage error" 2
check_contains "which says to give -o or --stats" "$RUN_ERR" "name the output with -o"
run "$AMPED_PREP" --stats -o "$T/dflt/x.amp" "$T/small.tns"
check_status "--stats with -o is a usage error" 2

# --no-sync: the same file, without waiting for the disk; .amp only.
run "$AMPED_PREP" -q -o "$T/dflt/s.amp" "$T/small.tns"
check_status "-o s.amp exits 0" 0
run "$AMPED_PREP" -q --no-sync -o "$T/dflt/ns.amp" "$T/small.tns"
check_status "--no-sync exits 0" 0
check_same "--no-sync writes the same file" "$T/dflt/s.amp" "$T/dflt/ns.amp"
run "$AMPED_PREP" -q --no-sync -o "$T/dflt/ns.tns" "$T/small.tns"
check_status "--no-sync with .tns output is a usage error" 2
check_contains "which names the option" "$RUN_ERR" "--no-sync applies to .amp output only"
# Whether the file is flushed shows only in the system calls.
if command -v strace >/dev/null 2>&1 && strace -f -o /dev/null true 2>/dev/null; then
    # strace exits with the traced program's status: a run that failed
    # before it could sync must not pass as "no fsync". LeakSanitizer
    # cannot run under ptrace (CI's sanitizer build): leaks are another
    # run's to find.
    no_lsan="ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
    run env "$no_lsan" strace -f -e trace=fsync,fdatasync -o "$T/sync.trace" \
        "$AMPED_PREP" -q -f -o "$T/dflt/s.amp" "$T/small.tns"
    check_status "under strace, the default run exits 0" 0
    check "by default the .amp file is flushed (fsync)" grep -q fsync "$T/sync.trace"
    run env "$no_lsan" strace -f -e trace=fsync,fdatasync -o "$T/nosync.trace" \
        "$AMPED_PREP" -q -f --no-sync -o "$T/dflt/ns.amp" "$T/small.tns"
    check_status "under strace, the --no-sync run exits 0" 0
    check "under strace, --no-sync still writes the same file" cmp -s "$T/dflt/s.amp" "$T/dflt/ns.amp"
    lacks() { test -s "$2" && ! grep -q "$1" "$2"; }   # a trace not written lacks nothing
    check "--no-sync: no fsync at all" lacks fsync "$T/nosync.trace"
else
    skip "by default the .amp file is flushed (fsync)" "no strace, or it may not trace here"
    skip "--no-sync: no fsync at all" "no strace, or it may not trace here"
    skip "under strace, the runs exit 0" "no strace, or it may not trace here"
fi

# ---- -o on a failing input leaves nothing behind --------------------------
mkdir "$T/fail"
for ext in tns bin; do
    run "$AMPED_PREP" -o "$T/fail/out.$ext" "$T/bad.tns"
    check_status "-o out.$ext from a bad input exits 1" 1
    check_contains "-o out.$ext from a bad input: file and line named" "$RUN_ERR" "$T/bad.tns:3:"
    check "-o out.$ext from a bad input: no output file" test ! -e "$T/fail/out.$ext"
done
ls -A "$T/fail" >"$T/ls.txt"
check_empty "-o from a bad input: no leftover OUT.tmp.* files" "$T/ls.txt"
printf 'keep me\n' >"$T/fail/old.tns"
run "$AMPED_PREP" -f -o "$T/fail/old.tns" "$T/bad.tns"
check_status "-o --force over an existing file from a bad input exits 1" 1
is "-o from a bad input keeps the old file" "$(cat "$T/fail/old.tns")" "keep me"
run "$AMPED_PREP" -o "$T/no-such-dir/out.bin" "$T/small.tns"
check_status "-o into a missing directory exits 1" 1
check_contains "-o into a missing directory: the output is named" "$RUN_ERR" "$T/no-such-dir/out.bin"

# ---- -q and -v -------------------------------------------------------------
run "$AMPED_PREP" --stats -q "$T/small.tns"
check_status "-q exits 0" 0
check_empty "-q prints nothing on stdout" "$RUN_OUT"
check_empty "-q prints nothing on stderr" "$RUN_ERR"
run "$AMPED_PREP" --quiet -o "$T/out/q.bin" "$T/small.tns"
check_status "--quiet -o exits 0" 0
check_empty "--quiet -o prints nothing on stdout" "$RUN_OUT"
check_empty "--quiet -o prints nothing on stderr" "$RUN_ERR"
check_same "--quiet -o still writes the file" "$T/out/a.bin" "$T/out/q.bin"
# -q drops the report, not warnings (amped-prep(1)): a duplicate is one.
run "$AMPED_PREP" --stats -q "$T/dup.tns"
check_status "-q on a file with duplicates exits 0" 0
check_empty "-q on a file with duplicates: no report" "$RUN_OUT"
if test "$(wc -l <"$RUN_ERR")" -eq 1 && grep '^amped-prep: warning: .*1 duplicate coordinate summed$' "$RUN_ERR" >/dev/null; then
    pass "-q on a file with duplicates: only the warning on stderr"
else
    fail "-q on a file with duplicates: only the warning on stderr"
    diag_run
fi
run "$AMPED_PREP" --stats -q "$T/bad.tns"
check_status "-q on a bad file exits 1" 1
check_contains "-q still prints errors" "$RUN_ERR" "$T/bad.tns:3:"
run "$AMPED_PREP" --stats -v "$T/small.tns"
check_status "-v exits 0" 0
check_contains "-v prints timings on stderr" "$RUN_ERR" "read "
stats_of "$RUN_OUT" >"$T/sv"
check_same_stats "-v prints the same statistics" "$T/s0" "$T/sv"

# ---- duplicates -----------------------------------------------------------
run "$AMPED_PREP" --stats "$T/dup.tns"
check_status "duplicates summed: exit 0" 0
check_contains "duplicates summed: nonzeros" "$RUN_OUT" "nonzeros:   2"
check_contains "duplicates summed: count" "$RUN_OUT" "duplicates: 1"
check_contains "duplicates summed: values added" "$RUN_OUT" "max 4,"
check_contains "duplicates summed: warning names the file" "$RUN_ERR" "$T/dup.tns: 1 duplicate coordinate summed"
run "$AMPED_PREP" --stats --duplicates keep "$T/dup.tns"
check_status "--duplicates keep: exit 0" 0
check_contains "--duplicates keep: nonzeros" "$RUN_OUT" "nonzeros:   3"
check_contains "--duplicates keep: count" "$RUN_OUT" "duplicates: 1"
run "$AMPED_PREP" --stats --duplicates error "$T/dup.tns"
check_status "--duplicates error exits 1" 1
check_contains "--duplicates error names the coordinate" "$RUN_ERR" "(1, 1, 1)"
check_empty "--duplicates error: nothing on stdout" "$RUN_OUT"

# ---- standard input ---------------------------------------------------------
run_stdin "$T/small.tns" "$AMPED_PREP" --stats -
check_status "reading a pipe ('-') exits 0" 0
check_contains "a pipe is named standard input" "$RUN_OUT" "input:      (standard input) (FROSTT text, "
stats_of "$RUN_OUT" >"$T/sp"
check_same_stats "a pipe gives the same statistics as the file" "$T/s0" "$T/sp"
RUN_CMD="$AMPED_PREP - < small.tns"
"$AMPED_PREP" --stats - <"$T/small.tns" >"$RUN_OUT" 2>"$RUN_ERR"
RUN_RC=$?
check_status "standard input redirected from a file exits 0" 0
stats_of "$RUN_OUT" >"$T/sr"
check_same_stats "a redirected file gives the same statistics" "$T/s0" "$T/sr"
run_stdin "$T/bad.tns" "$AMPED_PREP" --stats -
check_status "a bad pipe exits 1" 1
check_contains "a bad pipe: the message names standard input and the line" "$RUN_ERR" "(standard input):3:"
run_stdin "$T/out/a.bin" "$AMPED_PREP" --stats --input-format bin -
check_status "--input-format bin reads a .bin from a pipe" 0
stats_of "$RUN_OUT" >"$T/sb"
check_same_stats "a .bin from a pipe gives the same statistics" "$T/s0" "$T/sb"
run_stdin "$T/out/a.bin" "$AMPED_PREP" --stats -
check_status "a .bin on a pipe without --input-format bin is refused as text" 1
# Trailing bytes after a complete .bin: refused for a file, so on a pipe too.
cat "$T/out/a.bin" >"$T/trail.bin"
printf 'junk' >>"$T/trail.bin"
run "$AMPED_PREP" --stats "$T/trail.bin"
check_status "a .bin file with trailing bytes exits 1" 1
check_contains "a .bin file with trailing bytes: said so" "$RUN_ERR" "trailing bytes"
run_stdin "$T/trail.bin" "$AMPED_PREP" --stats --input-format bin -
check_status "a .bin on a pipe with trailing bytes exits 1" 1
check_contains "a .bin on a pipe with trailing bytes: said so" "$RUN_ERR" "trailing"
# A truncated .bin on a pipe: the size is unknown, so it shows at the end.
head -c 60 "$T/out/a.bin" >"$T/trunc.bin"
run_stdin "$T/trunc.bin" "$AMPED_PREP" --stats --input-format bin -
check_status "a truncated .bin on a pipe exits 1" 1
check_contains "a truncated .bin on a pipe: said so" "$RUN_ERR" "(standard input): truncated at byte 60"

# ---- --input-format -------------------------------------------------------
cp "$T/out/a.bin" "$T/a-bin.dat"
run "$AMPED_PREP" --stats --input-format=bin "$T/a-bin.dat"
check_status "--input-format=bin reads a .bin under another name" 0
stats_of "$RUN_OUT" >"$T/sf"
check_same_stats "--input-format=bin: same statistics" "$T/s0" "$T/sf"
cp "$T/small.tns" "$T/text.bin"
run "$AMPED_PREP" --stats --input-format tns "$T/text.bin"
check_status "--input-format tns reads text named .bin" 0
run "$AMPED_PREP" --stats "$T/text.bin"
check_status "text named .bin is read as binary by default and refused" 1
check_contains "text named .bin: the message names the file" "$RUN_ERR" "$T/text.bin"

# ---- --index-base -----------------------------------------------------------
run "$AMPED_PREP" --stats "$T/zero.tns"
check_status "0-based input, detected: exit 0" 0
check_contains "0-based input is detected" "$RUN_OUT" "0-based)"
stats_of "$RUN_OUT" >"$T/sz"
check_same_stats "0-based input: same statistics as its 1-based twin" "$T/s0" "$T/sz"
run "$AMPED_PREP" --stats --index-base 0 "$T/zero.tns"
check_status "--index-base 0 on 0-based input: exit 0" 0
check_contains "--index-base 0 is reported" "$RUN_OUT" "0-based)"
stats_of "$RUN_OUT" >"$T/sz0"
check_same_stats "--index-base 0: same statistics as its 1-based twin" "$T/s0" "$T/sz0"
run "$AMPED_PREP" --stats --index-base=1 "$T/zero.tns"
check_status "--index-base 1 on 0-based input exits 1" 1
check_contains "--index-base 1 on 0-based input: file and line named" "$RUN_ERR" "$T/zero.tns:1: index 0 in mode 1"
run "$AMPED_PREP" --stats --index-base 0 "$T/small.tns"
check_status "--index-base 0 forced on input without a 0: exit 0" 0
check_contains "--index-base 0 forced: every dimension grows by one" "$RUN_OUT" "dims:       4 x 5 x 6"
run "$AMPED_PREP" --stats --index-base auto "$T/small.tns"
check_status "--index-base auto: exit 0" 0
check_contains "--index-base auto on 1-based input" "$RUN_OUT" "1-based)"
run "$AMPED_PREP" -o "$T/out/z.tns" "$T/zero.tns"
check_status "0-based input converts" 0
check_same "0-based input is written 1-based" "$T/out/b.tns" "$T/out/z.tns"

# ---- --dims -------------------------------------------------------------------
run "$AMPED_PREP" --stats --dims 10,20,30 "$T/small.tns"
check_status "--dims larger than the data is accepted" 0
check_contains "--dims larger than the data is shown" "$RUN_OUT" "dims:       10 x 20 x 30"
check_contains "--dims larger: slices per mode follow" "$RUN_OUT" "mode 3      30 slices, 4 non-empty"
run "$AMPED_PREP" --stats --dims 3,4,5 "$T/small.tns"
check_status "--dims equal to the data is accepted" 0
run "$AMPED_PREP" --stats --dims 3,3,5 "$T/small.tns"
check_status "--dims smaller than the data exits 1" 1
check_contains "--dims smaller: the file and the line of the index are named" "$RUN_ERR" "$T/small.tns:4: index 4 in mode 2 exceeds the given dimension 3"
check_empty "--dims smaller: nothing on stdout" "$RUN_OUT"
run "$AMPED_PREP" --stats --dims 3,4 "$T/small.tns"
check_status "--dims with too few dimensions exits 1" 1
check_contains "--dims with too few dimensions is explained" "$RUN_ERR" "the data has 3 modes but 2 dimensions were given"
run "$AMPED_PREP" --stats --index-base 0 --dims 3,4,5 "$T/zero.tns"
check_status "--dims with 0-based input: exact fit accepted" 0
run "$AMPED_PREP" --stats --index-base 0 --dims 3,3,5 "$T/zero.tns"
check_status "--dims with 0-based input: too small exits 1" 1
check_contains "--dims with 0-based input: line named" "$RUN_ERR" "$T/zero.tns:3:"
run "$AMPED_PREP" --dims 10,20,30 -o "$T/out/dims.bin" "$T/small.tns"
check_status "--dims 10,20,30 -o dims.bin exits 0" 0
run "$AMPED_PREP" --stats "$T/out/dims.bin"
check_status "reading dims.bin exits 0" 0
check_contains "--dims are kept in a written .bin" "$RUN_OUT" "dims:       10 x 20 x 30"

# ---- threads --------------------------------------------------------------
run "$AMPED_PREP" --stats -t 1 "$T/small.tns"
check_status "-t 1 exits 0" 0
stats_of "$RUN_OUT" >"$T/t1"
run "$AMPED_PREP" --stats --threads 3 "$T/small.tns"
check_status "--threads 3 exits 0" 0
stats_of "$RUN_OUT" >"$T/t3"
check_same_stats "-t 1 and --threads 3 give the same statistics" "$T/t1" "$T/t3"

# ---- progress bars on a terminal ------------------------------------------
# They draw only when standard error is a terminal: script(1) from
# util-linux gives the program one, where there is a pseudo-terminal.
# screen: what a terminal would show of a typescript, line by line: the
# text after the last carriage return, the erase-line sequences dropped.
screen() {
    awk '{ sub(/\r$/, ""); n = split($0, part, "\r"); s = part[n]; gsub(/\033\[K/, "", s); print s }' "$1"
}
if script -qec true /dev/null </dev/null >/dev/null 2>&1; then
    RUN_CMD="script -qec '$AMPED_PREP -f -o $T/out/tty.amp $T/small.tns' /dev/null"
    script -qec "'$AMPED_PREP' -f -o '$T/out/tty.amp' '$T/small.tns'" /dev/null \
        </dev/null >"$RUN_OUT" 2>"$RUN_ERR"
    RUN_RC=$?
    check_status "on a terminal, writing .amp exits 0" 0
    for label in reading relabelling ordering writing finishing; do
        check_contains "on a terminal, a '$label' bar is drawn" "$RUN_OUT" "$label"
    done
    screen "$RUN_OUT" >"$T/screen"
    check "on a terminal, the report's lines start clean" grep -q '^output:     ' "$T/screen"
    check "on a terminal, every bar is erased" \
        sh -c "! grep -E '^(reading|values|relabelling|ordering|writing|finishing) ' '$T/screen'"
    RUN_CMD="script -qec '$AMPED_PREP -q -f -o $T/out/tty.amp $T/small.tns' /dev/null"
    script -qec "'$AMPED_PREP' -q -f -o '$T/out/tty.amp' '$T/small.tns'" /dev/null \
        </dev/null >"$RUN_OUT" 2>"$RUN_ERR"
    RUN_RC=$?
    check_status "on a terminal with -q, exits 0" 0
    check_empty "on a terminal with -q, no bar (nor anything else)" "$RUN_OUT"
else
    for what in "exits 0" reading relabelling ordering writing finishing "report clean" \
        "bars erased" "-q exits 0" "-q draws nothing"; do
        skip "on a terminal: $what" "no script(1) from util-linux, or no pseudo-terminal"
    done
fi

done_testing
