# tests/lib.sh: helpers for the TAP test scripts, sourced by each of them.
#
# Run by `make check` through automake's tap-driver.sh, which exports
# top_builddir, top_srcdir and AMP_TEST_DATA. A script can also be run by
# hand from any directory (sh tests/corpus.sh): the tree is then found from
# the script's own path.
#
# Usage in a script:
#   . "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
#   plan 3                      # or leave the plan to done_testing
#   run "$AMPED_PREP" --help    # $RUN_RC, $RUN_OUT, $RUN_ERR
#   check_status "--help exits 0" 0
#   check_contains "--help shows usage" "$RUN_OUT" "Usage: amped-prep"
#   check "files are equal" cmp -s a b
#   check_same_stats "same report" stats1 stats2
#   done_testing
#
# Every failed check prints '# ' diagnostics: the command that ran, its exit
# status and the start of its output.

if test -z "${top_srcdir:-}"; then
    top_srcdir=$(cd "$(dirname "$0")/.." && pwd)
fi
if test -z "${top_builddir:-}"; then
    top_builddir=$top_srcdir
fi
: "${AMP_TEST_DATA:=$top_srcdir/../shared/data}"
export top_srcdir top_builddir AMP_TEST_DATA

AMPED_PREP=$top_builddir/amped-prep
AMPED_RUN=$top_builddir/amped-run
AMPED_GEN=$top_builddir/bench/amped-gen
FILES=$top_srcdir/tests/files
# Messages and number formats must not depend on the caller's locale.
LC_ALL=C
export LC_ALL

tap_count=0
tap_failed=0
tap_planned=

# ---- temporary directory, removed on any exit -----------------------------
T=$(mktemp -d "${TMPDIR:-/tmp}/amped-test.XXXXXX") || {
    echo "Bail out! cannot create a temporary directory in ${TMPDIR:-/tmp}"
    exit 1
}
trap 'rm -rf "$T"' EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- TAP output -------------------------------------------------------------
plan() {
    tap_planned=$1
    echo "1..$1"
}

skip_all() {
    echo "1..0 # SKIP $*"
    exit 0
}

# need_program PATH...: make check builds every program the scripts run,
# so a missing one is a failure (a bail-out), never a skip.
need_program() {
    for _p in "$@"; do
        if ! test -x "$_p"; then
            echo "Bail out! $_p is not built (make check builds it)"
            exit 1
        fi
    done
}

# need_real_data: the tensors of $AMP_TEST_DATA (../shared/data). Where
# there are none the script's tests are skipped with the reason, or under
# CI (CI=true, which always has them) fail.
need_real_data() {
    set -- "$AMP_TEST_DATA"/*.tns
    test -f "$1" && return 0
    if test "${CI:-}" = true; then
        echo "Bail out! no .tns files in AMP_TEST_DATA=$AMP_TEST_DATA (CI=true needs ../shared/data)"
        exit 1
    fi
    skip_all "no .tns files in AMP_TEST_DATA=$AMP_TEST_DATA"
}

# diag TEXT...: each line of TEXT as a TAP comment.
diag() {
    printf '%s\n' "$*" | sed 's/^/# /'
}

# diag_file LABEL FILE: the first lines of FILE as TAP comments.
diag_file() {
    if test -s "$2"; then
        echo "# $1:"
        head -n 15 "$2" | cut -c1-300 | sed 's/^/#   /'
        _n=$(wc -l <"$2")
        test "$_n" -le 15 || echo "#   ... ($_n lines in all)"
    else
        echo "# $1: (empty)"
    fi
}

pass() {
    tap_count=$((tap_count + 1))
    echo "ok $tap_count - $1"
}

fail() {
    tap_count=$((tap_count + 1))
    tap_failed=$((tap_failed + 1))
    echo "not ok $tap_count - $1"
}

# skip DESCRIPTION REASON: a test that cannot run here.
skip() {
    tap_count=$((tap_count + 1))
    echo "ok $tap_count - $1 # SKIP $2"
}

# diag_run: what the last `run` did, for a failed check.
diag_run() {
    diag "command: $RUN_CMD"
    diag "exit status: $RUN_RC"
    diag_file stdout "$RUN_OUT"
    diag_file stderr "$RUN_ERR"
}

# ---- running commands -------------------------------------------------------
RUN_OUT=$T/run.stdout
RUN_ERR=$T/run.stderr
RUN_RC=
RUN_CMD=

# run CMD ARGS...: run with stdin from /dev/null; stdout, stderr and the
# exit status go to $RUN_OUT, $RUN_ERR and $RUN_RC.
run() {
    RUN_CMD=$*
    "$@" </dev/null >"$RUN_OUT" 2>"$RUN_ERR"
    RUN_RC=$?
}

# run_stdin FILE CMD ARGS...: like run, with FILE on standard input through a
# pipe (so the program sees a pipe, not a regular file).
run_stdin() {
    _in=$1
    shift
    RUN_CMD="cat $_in | $*"
    # The status of a pipeline is that of its last command.
    cat "$_in" | "$@" >"$RUN_OUT" 2>"$RUN_ERR"
    RUN_RC=$?
}

# ---- checks -----------------------------------------------------------------
# check DESCRIPTION CMD ARGS...: passes when the command exits 0.
check() {
    _d=$1
    shift
    if "$@" >"$T/check.out" 2>&1; then
        pass "$_d"
    else
        _rc=$?
        fail "$_d"
        diag "command: $* (exit status $_rc)"
        diag_file output "$T/check.out"
    fi
}

# check_close DESCRIPTION A B [TOL]: the numbers A and B (fits) within TOL
# (default 1e-6) of each other. Either one empty or not a number (no fit
# printed, "nan") fails: awk takes "" for 0, and mawk's nan compares equal
# to anything.
check_close() {
    if is_number "$2" && is_number "$3"; then
        check "$1" awk -v a="$2" -v b="$3" -v t="${4:-1e-6}" \
            'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t) }'
    else
        fail "$1"
        diag "not two numbers: '$2' and '$3'"
    fi
}

# check_status DESCRIPTION EXPECTED: the last run's exit status.
check_status() {
    if test "$RUN_RC" = "$2"; then
        pass "$1"
    else
        fail "$1"
        diag "expected exit status $2"
        diag_run
    fi
}

# check_contains DESCRIPTION FILE TEXT: FILE holds the fixed string TEXT.
check_contains() {
    if grep -F -e "$3" "$2" >/dev/null 2>&1; then
        pass "$1"
    else
        fail "$1"
        diag "expected to find: $3"
        diag "in: $2"
        diag_run
    fi
}

# check_line DESCRIPTION FILE LINE: FILE has a line that is exactly LINE
# ("nonzeros:   6" is in "nonzeros:   61", not a line of it).
check_line() {
    if grep -F -x -e "$3" "$2" >/dev/null 2>&1; then
        pass "$1"
    else
        fail "$1"
        diag "expected the line: $3"
        diag "in: $2"
        diag_run
    fi
}

# check_not_contains DESCRIPTION FILE TEXT
check_not_contains() {
    if grep -F -e "$3" "$2" >/dev/null 2>&1; then
        fail "$1"
        diag "did not expect to find: $3"
        diag "in: $2"
        diag_run
    else
        pass "$1"
    fi
}

# check_empty DESCRIPTION FILE
check_empty() {
    if test -s "$2"; then
        fail "$1"
        diag "expected $2 to be empty"
        diag_run
    else
        pass "$1"
    fi
}

# check_first_line_starts DESCRIPTION FILE PREFIX
check_first_line_starts() {
    _first=$(head -n 1 "$2")
    case $_first in
    "$3"*) pass "$1" ;;
    *)
        fail "$1"
        diag "expected the first line to start with: $3"
        diag "found first line: $_first"
        diag_run
        ;;
    esac
}

# check_last_line DESCRIPTION FILE TEXT: the last line of FILE is exactly TEXT.
check_last_line() {
    _last=$(tail -n 1 "$2")
    if test "$_last" = "$3"; then
        pass "$1"
    else
        fail "$1"
        diag "expected last line: $3"
        diag "found last line:    $_last"
        diag_run
    fi
}

# check_same DESCRIPTION FILE1 FILE2: identical, non-empty contents (diff on
# failure): two empty outputs of two failed runs are no match.
check_same() {
    if ! test -s "$2"; then
        fail "$1"
        diag "$2 is empty or missing"
        test -z "$RUN_CMD" || diag_run
    elif cmp -s "$2" "$3"; then
        pass "$1"
    else
        fail "$1"
        diag "$2 and $3 differ:"
        diff "$2" "$3" 2>&1 | head -n 20 | sed 's/^/#   /'
    fi
}

# check_same_stats DESCRIPTION FILE1 FILE2: two statistics reports (as from
# stats_of) that are identical and not empty: both must hold a "nonzeros:"
# line, so that two failed runs do not compare equal.
check_same_stats() {
    if ! grep '^nonzeros: ' "$2" >/dev/null 2>&1 || ! grep '^nonzeros: ' "$3" >/dev/null 2>&1; then
        fail "$1"
        diag "expected two statistics reports, but one has no 'nonzeros:' line"
        diag_file "$2" "$2"
        diag_file "$3" "$3"
        test -z "$RUN_CMD" || diag_run
    else
        check_same "$1" "$2" "$3"
    fi
}

# is DESCRIPTION GOT EXPECTED: string equality.
is() {
    if test "x$2" = "x$3"; then
        pass "$1"
    else
        fail "$1"
        diag "got:      $2"
        diag "expected: $3"
    fi
}

# stats_of FILE: the statistics that amped-prep printed, without the
# "input:" line (which names the file, its format and size).
stats_of() {
    sed '/^input:/d' "$1"
}

# done_testing: the plan if none was given, and the script's exit status.
# read_expect FILE: the corpus sidecar FILE.expect into $status (line 1,
# the exit status), $text (line 2, a substring of stderr or stdout) and
# $opts (line 3, options; may be empty). Fails (and reports) if it is missing.
read_expect() {
    exp=$1.expect
    if ! test -f "$exp"; then
        fail "${1##*/}: has a sidecar ${exp##*/}"
        return 1
    fi
    status=$(sed -n 1p "$exp")
    text=$(sed -n 2p "$exp")
    opts=$(sed -n 3p "$exp")
}

# is_number VALUE: VALUE is a finite number in decimal (as %.17g, %g or
# %e print one). Not "", "nan", "-nan", "inf" nor JSON's null: awk reads
# "" and "null" as 0, and mawk (Debian's awk) compares nan as equal to
# anything, so that a check fed one of those would pass.
is_number() {
    awk -v x="$1" "$AWK_NUM"' BEGIN { exit !num(x) }'
}

# AWK_NUM: awk's num(x), is_number for a field, to put before a program:
#   awk "$AWK_NUM"' { if (!num($1)) bad++ } ...'
AWK_NUM='function num(x) { return x ~ /^[-+]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][-+]?[0-9]+)?$/ }'

# The fits of a JSON report (amped-run --json), one a line, 17 digits (null
# where a fit was not finite, which max_diff refuses).
fits() {   # (CP-APR's report: its log-likelihoods)
    sed -n -e 's/.*{"iter": [0-9]*, "fit": \([^,]*\),.*/\1/p' \
        -e 's/.*{"iter": [0-9]*, "loglik": \([^,]*\),.*/\1/p' "$1"
}

# max_diff A B: the largest |a - b| / (1 + |b|) over the numbers of two
# files of the same shape (fits, or factor files); else a word, which
# `within` fails: "missing" (A or B is not there), "shape" (the shapes
# differ, or A is empty), "nonnumeric" (a field of either that is not a
# finite number: nan, inf, null, which would otherwise compare as 0 or,
# in mawk, as equal to anything).
max_diff() {
    if ! test -f "$1" || ! test -f "$2"; then
        echo missing
        return
    fi
    awk "$AWK_NUM"'
         FILENAME == ARGV[1] { for (i = 1; i <= NF; i++) { a[FNR, i] = $i; if (!num($i)) nan = 1 }
                               n[FNR] = NF; rows = FNR; next }
         { if (n[FNR] != NF) bad = 1
           for (i = 1; i <= NF; i++) { if (!num($i)) { nan = 1; continue }
               d = $i - a[FNR, i]; d = d < 0 ? -d : d
               s = $i < 0 ? -$i : $i; d /= 1 + s; if (d > m) m = d } seen = FNR }
         END { if (bad || seen != rows || rows == 0) print "shape"
               else if (nan) print "nonnumeric"
               else printf "%.3g\n", m + 0 }' "$1" "$2"
}

# factors_diff A B: the largest max_diff over the factor files of the
# prefixes A and B (A.mode*.mat and A.lambda.mat against B's), or the first
# of max_diff's words met: "missing" also where A has no mode files, "shape"
# where B has another number of them.
factors_diff() {
    _fd_w=0 _fd_na=0 _fd_nb=0
    for _fd_f in "$2".mode*.mat; do
        test -f "$_fd_f" && _fd_nb=$((_fd_nb + 1))
    done
    for _fd_f in "$1".mode*.mat "$1.lambda.mat"; do
        _fd_d=$(max_diff "$_fd_f" "$2${_fd_f#"$1"}")
        is_number "$_fd_d" || { echo "$_fd_d"; return; }
        case $_fd_f in *.mode*.mat) _fd_na=$((_fd_na + 1)) ;; esac
        _fd_w=$(awk -v a="$_fd_w" -v b="$_fd_d" 'BEGIN { print (b + 0 > a + 0) ? b : a }')
    done
    if test "$_fd_na" != "$_fd_nb"; then
        echo shape
        return
    fi
    echo "$_fd_w"
}

# within LABEL VALUE TOL: VALUE (a max_diff) is a number no larger than TOL;
# a word (shape, missing, nonnumeric) or nothing fails.
within() {
    if is_number "$2" && awk -v v="$2" -v t="$3" 'BEGIN { exit !(v + 0 <= t + 0) }'; then
        pass "$1 ($2)"
    elif is_number "$2"; then
        fail "$1: $2, more than $3"
    else
        fail "$1: not compared (${2:-no value}), tolerance $3"
    fi
}

done_testing() {
    if test -z "$tap_planned"; then
        echo "1..$tap_count"
    elif test "$tap_planned" != "$tap_count"; then
        diag "planned $tap_planned tests but ran $tap_count"
        tap_failed=$((tap_failed + 1))
    fi
    if test "$tap_failed" -gt 0; then
        diag "$tap_failed of $tap_count tests failed"
        exit 1
    fi
    exit 0
}
