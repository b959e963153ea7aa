#!/bin/sh
# amped-run's command line: help, version (with the build's backends),
# usage errors, and --list-devices, which either lists working GPUs or fails
# cleanly when there is no GPU, no driver or no CUDA in the build.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

need_program "$AMPED_RUN"

TRY="Try 'amped-run --help' for more information."
version=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' "$top_builddir/config.h")
if grep '^#define AMP_HAVE_CUDA 1' "$top_builddir/config.h" >/dev/null 2>&1; then
    cuda_build=yes
else
    cuda_build=no
fi
if grep '^#define AMP_HAVE_NCCL 1' "$top_builddir/config.h" >/dev/null 2>&1; then
    nccl_build=yes
else
    nccl_build=no
fi

# ---- --help, --version ---------------------------------------------------
for opt in --help -h; do
    run "$AMPED_RUN" $opt
    check_status "$opt exits 0" 0
    check_contains "$opt prints the usage on stdout" "$RUN_OUT" "Usage: amped-run [OPTION]... FILE.amp"
    check_empty "$opt prints nothing on stderr" "$RUN_ERR"
done
run "$AMPED_RUN" --help
check_contains "--help lists --list-devices" "$RUN_OUT" "--list-devices"
check_contains "--help documents the exit statuses" "$RUN_OUT" "Exit status: 0 on success, 1 on a failure, 2 on a usage error."

for opt in --version -V; do
    run "$AMPED_RUN" $opt
    check_status "$opt exits 0" 0
    is "$opt: first line is name and version" "$(head -n 1 "$RUN_OUT")" "amped-run (amped) $version"
    check_empty "$opt prints nothing on stderr" "$RUN_ERR"
done
run "$AMPED_RUN" --version
check_contains "--version states the CUDA backend of this build ($cuda_build)" "$RUN_OUT" "CUDA backend: $cuda_build"
check_contains "--version states NCCL in this build ($nccl_build)" "$RUN_OUT" "NCCL: $nccl_build"

# ---- usage errors -----------------------------------------------------------
run "$AMPED_RUN" --bogus-option x.amp
check_status "unknown option exits 2" 2
check_contains "unknown option is named" "$RUN_ERR" "--bogus-option"
check_first_line_starts "unknown option: the message starts with 'amped-run: ' (not the path run)" "$RUN_ERR" "amped-run: "
check_last_line "unknown option: stderr ends with the --help hint" "$RUN_ERR" "$TRY"
check_empty "unknown option: nothing on stdout" "$RUN_OUT"
run "$AMPED_RUN" -Z
check_status "unknown short option exits 2" 2
check_last_line "unknown short option: stderr ends with the --help hint" "$RUN_ERR" "$TRY"
run "$AMPED_RUN" --list-devices=yes
check_status "an argument to --list-devices exits 2" 2
check_last_line "--list-devices=yes: stderr ends with the --help hint" "$RUN_ERR" "$TRY"

run "$AMPED_RUN"
check_status "missing operand exits 2" 2
check_contains "missing operand is explained" "$RUN_ERR" "missing FILE.amp"
check_last_line "missing operand: stderr ends with the --help hint" "$RUN_ERR" "$TRY"
check_empty "missing operand: nothing on stdout" "$RUN_OUT"
run "$AMPED_RUN" -q
check_status "missing operand with -q still exits 2" 2
check_contains "missing operand with -q: still explained" "$RUN_ERR" "missing FILE.amp"

run "$AMPED_RUN" a.amp b.amp
check_status "two operands exit 2" 2
check_contains "the extra operand is named" "$RUN_ERR" "'b.amp'"
check_last_line "two operands: stderr ends with the --help hint" "$RUN_ERR" "$TRY"

run "$AMPED_RUN" "$T/none.amp"
check_status "a FILE.amp it cannot read exits 1 (not a usage error)" 1
check_contains "the unreadable file is named" "$RUN_ERR" "$T/none.amp"
check_not_contains "a failure is not followed by the usage hint" "$RUN_ERR" "$TRY"

# ---- --list-devices ------------------------------------------------------------
# Two consistent outcomes only:
#  listed: exit 0, one "GPU N: ... self-test passed" line per device on
#          stdout, numbered from 0, nothing on stderr;
#  none:   exit 1, nothing on stdout, and one "amped-run: " message saying
#          why (no device, no usable driver, or no CUDA in this build).
run "$AMPED_RUN" --list-devices
cp "$RUN_OUT" "$T/list.out"
cp "$RUN_ERR" "$T/list.err"
ngpu=$(grep -c '^GPU [0-9][0-9]*: .*, compute capability [0-9][0-9]*\.[0-9][0-9]*, [0-9][0-9]* SMs, .* memory (.* free), PCI [0-9a-f][0-9a-f]:[0-9a-f][0-9a-f], self-test passed$' "$T/list.out")
nlines=$(wc -l <"$T/list.out" | tr -d ' ')
case $RUN_RC in
0)
    if test "$ngpu" -ge 1 && test "$ngpu" = "$nlines" && ! test -s "$T/list.err" &&
        test "$cuda_build" = yes; then
        pass "--list-devices: exit 0 and $ngpu GPU(s) listed, each passing its self-test"
        # GPU lines are numbered 0, 1, ... in order.
        numbers=$(sed -n 's/^GPU \([0-9][0-9]*\):.*/\1/p' "$T/list.out" | tr '\n' ' ')
        expect=$(awk -v n="$ngpu" 'BEGIN { for (i = 0; i < n; i++) printf "%d ", i }')
        is "--list-devices: GPUs numbered from 0" "$numbers" "$expect"
    else
        fail "--list-devices: exit 0 must list at least one GPU, each 'self-test passed', and nothing else"
        diag "CUDA build: $cuda_build; well-formed GPU lines: $ngpu of $nlines"
        diag_run
    fi
    ;;
1)
    if test "$nlines" = 0 && test "$(wc -l <"$T/list.err" | tr -d ' ')" -ge 1 &&
        grep -E '^amped-run: .*(CUDA|driver)' "$T/list.err" >/dev/null; then
        pass "--list-devices: exit 1 with a clear message and nothing on stdout"
        diag "$(cat "$T/list.err")"
        if test "$cuda_build" = no; then
            check_contains "--list-devices in a build without CUDA says so" "$T/list.err" "no CUDA backend"
        else
            # No device: the message says that, with CUDA's reason.
            check_contains "--list-devices with CUDA but no usable GPU says so" "$T/list.err" \
                "no CUDA device found"
        fi
    else
        fail "--list-devices: exit 1 must come with a clear message and nothing on stdout"
        diag_run
    fi
    ;;
*)
    fail "--list-devices: exit 0 (GPUs listed) or 1 (none usable), not $RUN_RC"
    diag_run
    ;;
esac
# When nvidia-smi sees GPUs and this build has CUDA, they must be listed.
if test "$cuda_build" = yes && command -v nvidia-smi >/dev/null 2>&1 &&
    nsmi=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ') && test "$nsmi" -gt 0; then
    if test -n "${CUDA_VISIBLE_DEVICES+set}"; then
        skip "--list-devices lists what nvidia-smi sees" "CUDA_VISIBLE_DEVICES is set"
    else
        is "--list-devices lists the $nsmi GPU(s) that nvidia-smi sees" "$ngpu" "$nsmi"
    fi
else
    skip "--list-devices lists what nvidia-smi sees" "no CUDA build or no GPU visible to nvidia-smi"
fi

# --list-devices takes no operand: a usage error, before any device work.
run "$AMPED_RUN" --list-devices some.amp
check_status "--list-devices with an operand exits 2" 2
check_contains "--list-devices with an operand: the operand is named" "$RUN_ERR" "'some.amp'"
check_last_line "--list-devices with an operand: stderr ends with the --help hint" "$RUN_ERR" "$TRY"
check_empty "--list-devices with an operand: nothing on stdout" "$RUN_OUT"

done_testing
