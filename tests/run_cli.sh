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
check_status "--help (again) exits 0" 0
check_contains "--help lists --list-devices" "$RUN_OUT" "--list-devices"
check_contains "--help documents the exit statuses" "$RUN_OUT" "Exit status: 0 on success, 1 on a failure, 2 on a usage error."

for opt in --version -V; do
    run "$AMPED_RUN" $opt
    check_status "$opt exits 0" 0
    is "$opt: first line is name and version" "$(head -n 1 "$RUN_OUT")" "amped-run (amped) $version"
    check_empty "$opt prints nothing on stderr" "$RUN_ERR"
done
run "$AMPED_RUN" --version
check_status "--version (again) exits 0" 0
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
# The outcome is known before the run, from the build (config.h, which
# --version must agree with, above), the CUDA driver (--version names it or
# says "no driver") and the GPUs nvidia-smi sees; each case has its exact
# exit status and message:
#  no CUDA in the build:   exit 1, "amped-run: this build has no CUDA backend
#                          (configure --with-cuda)", nothing on stdout;
#  no driver (CI's case): exit 1, "amped-run: no CUDA device found: there
#                          is no NVIDIA driver on this machine; --gpus 0
#                          runs on the CPU", nothing on stdout;
#  a driver older than the runtime's major version: exit 1, "amped-run: no
#                          CUDA device found: the NVIDIA driver supports
#                          CUDA D, older than the R this build needs
#                          (update the driver); --gpus 0 runs on the CPU";
#  nvidia-smi sees N GPUs: exit 0, N lines "GPU i: ..., self-test passed",
#                          numbered from 0, nothing on stderr;
#  a driver, no GPU:       exit 1, "amped-run: no CUDA device found (no
#                          CUDA-capable device is detected); --gpus 0 runs
#                          on the CPU" (or "(the runtime reports 0
#                          devices)"), nothing on stdout.
# CUDA_VISIBLE_DEVICES is unset for the run, so that it sees what
# nvidia-smi sees (which ignores it).
nsmi=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >"$T/smi" 2>/dev/null; then
    nsmi=$(grep -c '^GPU [0-9]' "$T/smi")
fi
run "$AMPED_RUN" --version
check_status "--version (for the driver) exits 0" 0
cuda_line=$(grep '^CUDA backend: ' "$RUN_OUT")
runtime=$(printf '%s\n' "$cuda_line" | sed -n 's/^CUDA backend: yes, runtime \([0-9][0-9]*\.[0-9][0-9]*\) .*/\1/p')
driver=$(printf '%s\n' "$cuda_line" | sed -n 's/^CUDA backend: yes, runtime [0-9.]* (driver \([0-9][0-9]*\.[0-9][0-9]*\))$/\1/p')
case $cuda_line in
*"(no driver)") driver=none ;;
esac
NO_DEVICE="amped-run: no CUDA device found"
ON_CPU="; --gpus 0 runs on the CPU"
if test "$cuda_build" = no; then
    case_name="a build without CUDA"
    want_rc=1 want_err="amped-run: this build has no CUDA backend (configure --with-cuda)"
elif test "$driver" = none; then
    case_name="a CUDA build, no CUDA driver"
    want_rc=1 want_err="$NO_DEVICE: there is no NVIDIA driver on this machine$ON_CPU"
    # A GPU that nvidia-smi sees has a driver: --version must not deny it.
    is "--version finds a driver where nvidia-smi sees $nsmi GPU(s)" "$nsmi" 0
elif test -z "$runtime" || test -z "$driver"; then
    case_name="unknown"
    fail "--version names the CUDA runtime and driver (or 'no driver')"
    diag "got: $cuda_line"
elif test "${driver%%.*}" -lt "${runtime%%.*}"; then
    case_name="a CUDA $runtime build, driver $driver (older major version)"
    want_rc=1 want_err="$NO_DEVICE: the NVIDIA driver supports CUDA $driver, older than the $runtime this build needs (update the driver)$ON_CPU"
elif test "$nsmi" -ge 1; then
    case_name="a CUDA build, $nsmi GPU(s) seen by nvidia-smi"
    want_rc=0 want_err=
else
    case_name="a CUDA build, a driver, no GPU"
    want_rc=1 want_err="$NO_DEVICE (no CUDA-capable device is detected)$ON_CPU"
fi
if test "${CUDA_VISIBLE_DEVICES+set}" = set; then
    saved_cvd=$CUDA_VISIBLE_DEVICES
    unset CUDA_VISIBLE_DEVICES
    run "$AMPED_RUN" --list-devices
    CUDA_VISIBLE_DEVICES=$saved_cvd
    export CUDA_VISIBLE_DEVICES
else
    run "$AMPED_RUN" --list-devices
fi
if test "$case_name" != unknown; then
    check_status "--list-devices on $case_name: exit $want_rc" "$want_rc"
    if test "$want_rc" = 0; then
        check_empty "--list-devices on $case_name: nothing on stderr" "$RUN_ERR"
        ngpu=$(grep -c '^GPU [0-9][0-9]*: .*, compute capability [0-9][0-9]*\.[0-9][0-9]*, [0-9][0-9]* SMs, .* memory (.* free), PCI [0-9a-f][0-9a-f]:[0-9a-f][0-9a-f], self-test passed$' "$RUN_OUT")
        nlines=$(wc -l <"$RUN_OUT" | tr -d ' ')
        is "--list-devices on $case_name: one line per GPU" "$nlines" "$nsmi"
        is "--list-devices on $case_name: every line well formed, 'self-test passed'" "$ngpu" "$nsmi"
        # GPU lines are numbered 0, 1, ... in order.
        numbers=$(sed -n 's/^GPU \([0-9][0-9]*\):.*/\1/p' "$RUN_OUT" | tr '\n' ' ')
        expect=$(awk -v n="$nsmi" 'BEGIN { for (i = 0; i < n; i++) printf "%d ", i }')
        is "--list-devices on $case_name: GPUs numbered from 0" "$numbers" "$expect"
    else
        check_empty "--list-devices on $case_name: nothing on stdout" "$RUN_OUT"
        got_err=$(cat "$RUN_ERR")
        if test "$want_err" = "$NO_DEVICE (no CUDA-capable device is detected)$ON_CPU" &&
            test "$got_err" = "$NO_DEVICE (the runtime reports 0 devices)$ON_CPU"; then
            want_err=$got_err
        fi
        is "--list-devices on $case_name: stderr is exactly the reason" "$got_err" "$want_err"
    fi
fi

# Without a usable GPU, asking for one fails with the reason above, naming
# the option as the user gave it (--devices 0 was reported as --gpus 1).
if test "$case_name" != unknown && test "$want_rc" = 1; then
    need_program "$AMPED_PREP"
    printf '1 1 1 1.0\n2 2 2 2.0\n' >"$T/g.tns"
    "$AMPED_PREP" -q -o "$T/g.amp" "$T/g.tns" || { echo "Bail out! amped-prep failed"; exit 1; }
    reason=${want_err#amped-run: }
    if test "$cuda_build" = no; then
        reason="this build has no CUDA backend (configure --with-cuda); --gpus 0 runs on the CPU"
    fi
    for given in "--devices 0" "--devices 0,1" "--gpus 1"; do
        run "$AMPED_RUN" -q $given "$T/g.amp"
        check_status "$given on $case_name: exit 1" 1
        got_err=$(cat "$RUN_ERR")
        if test "$cuda_build" = no; then
            is "$given on $case_name: the reason" "$got_err" "amped-run: $reason"
        else
            case $got_err in
            "amped-run: $given: no CUDA device found"*"; --gpus 0 runs on the CPU")
                pass "$given on $case_name: names $given, says why and that --gpus 0 runs on the CPU" ;;
            *)
                fail "$given on $case_name: names $given, says why and that --gpus 0 runs on the CPU"
                diag "got: $got_err" ;;
            esac
        fi
    done
fi

# --list-devices takes no operand: a usage error, before any device work.
run "$AMPED_RUN" --list-devices some.amp
check_status "--list-devices with an operand exits 2" 2
check_contains "--list-devices with an operand: the operand is named" "$RUN_ERR" "'some.amp'"
check_last_line "--list-devices with an operand: stderr ends with the --help hint" "$RUN_ERR" "$TRY"
check_empty "--list-devices with an operand: nothing on stdout" "$RUN_OUT"

done_testing
