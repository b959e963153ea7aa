#!/bin/sh
# Every option value form at its edges, for both programs: the least and
# the greatest value and one past each, negative numbers, hexadecimal,
# blanks, empty values and list items, too many items, each spelling
# (--opt=V, --opt V, -oV, -o V, an abbreviation, an ambiguous one). A
# refused value: exit status 2 and the whole message, then the "Try"
# line. An accepted one: exit status 0 and the value in effect, as the
# JSON report (amped-run) or --info and the statistics (amped-prep) show
# it. The size suffixes, which no run on the CPU can show in effect, are
# checked value by value in test_common.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

need_program "$AMPED_PREP"
need_program "$AMPED_RUN"

printf '1 1 1 1.5\n2 3 1 2\n3 2 4 -0.5\n' > "$T/s.tns"
run "$AMPED_PREP" -q -o "$T/s.amp" "$T/s.tns"
test "$RUN_RC" = 0 || { diag_run; echo "Bail out! amped-prep failed"; exit 1; }

# refused PROGRAM 'ARGS' MESSAGE: exit 2, stderr exactly the message and
# the "Try" line, nothing on stdout. ARGS is split by the shell (eval),
# so a value with blanks or an empty one is quoted in it.
refused() {
    _prog=$1 _args=$2 _msg=$3
    eval "set -- $_args"
    case $_prog in
    run) run "$AMPED_RUN" "$@" "$T/s.amp"; _name=amped-run ;;
    run-last) run "$AMPED_RUN" "$T/s.amp" "$@"; _name=amped-run ;;
    prep) run "$AMPED_PREP" --stats "$@" "$T/s.tns"; _name=amped-prep ;;
    esac
    printf '%s: %s\nTry '\''%s --help'\'' for more information.\n' "$_name" "$_msg" "$_name" \
        > "$T/want"
    if test "$RUN_RC" = 2 && cmp -s "$T/want" "$RUN_ERR" && ! test -s "$RUN_OUT"; then
        pass "$_name $_args: exit 2, the message"
    else
        fail "$_name $_args: exit 2, the message"
        diag "expected: $_msg"
        diag_run
    fi
}

# takes 'ARGS' KEY VALUE: amped-run with ARGS (a rank-2 run of one
# iteration unless ARGS say otherwise) exits 0 and its JSON report has
# "KEY": VALUE.
takes() {
    _args=$1 _key=$2 _value=$3
    eval "set -- $_args"
    rm -f "$T/o.json"
    run "$AMPED_RUN" -q -t 1 -r 2 --iters 1 "$@" --json "$T/o.json" "$T/s.amp"
    if test "$RUN_RC" = 0 && grep -F -e "\"$_key\": $_value" "$T/o.json" >/dev/null 2>&1; then
        pass "amped-run $_args: \"$_key\": $_value"
    else
        fail "amped-run $_args: \"$_key\": $_value"
        diag_run
        test -f "$T/o.json" && diag_file o.json "$T/o.json"
    fi
}

R="expected an integer from"
# ---- amped-run: integers ----------------------------------------------------------
while IFS='|' read -r args msg; do
    refused run "$args" "$msg"
done <<EOF
-r 0|invalid value '0' for --rank: $R 1 to 4096
-r 4097|invalid value '4097' for --rank: $R 1 to 4096
--rank=-1|invalid value '-1' for --rank: $R 1 to 4096
--rank=|invalid value '' for --rank: $R 1 to 4096
--rank ' 3'|invalid value ' 3' for --rank: $R 1 to 4096
--rank 0x10|invalid value '0x10' for --rank: $R 1 to 4096
--rank 3.0|invalid value '3.0' for --rank: $R 1 to 4096
--iters 0|invalid value '0' for --iters: $R 1 to 1000000
--iters 1000001|invalid value '1000001' for --iters: $R 1 to 1000000
--seed 18446744073709551616|invalid value '18446744073709551616' for --seed: $R 0 to 18446744073709551615
--seed -1|invalid value '-1' for --seed: $R 0 to 18446744073709551615
--admm-inner 0|invalid value '0' for --admm-inner: $R 1 to 1000
--admm-inner 1001|invalid value '1001' for --admm-inner: $R 1 to 1000
-t 0|invalid value '0' for --threads: $R 1 to 4096
-t 4097|invalid value '4097' for --threads: $R 1 to 4096
--threads=-2|invalid value '-2' for --threads: $R 1 to 4096
--gpus 65|invalid value '65' for --gpus: $R 0 to 64
--gpus -1|invalid value '-1' for --gpus: $R 0 to 64
--stream-chunk 1023|invalid value '1023' for --stream-chunk: $R 1024 to 1099511627776
--stream-chunk 1099511627777|invalid value '1099511627777' for --stream-chunk: $R 1024 to 1099511627776
EOF

# ---- amped-run: numbers ------------------------------------------------------------
while IFS='|' read -r args msg; do
    refused run "$args" "$msg"
done <<EOF
--tol -0.1|invalid value '-0.1' for --tol: expected a number from 0 to 1
--tol 1.0000000001|invalid value '1.0000000001' for --tol: expected a number from 0 to 1
--tol nan|invalid value 'nan' for --tol: expected a number from 0 to 1
--tol inf|invalid value 'inf' for --tol: expected a number from 0 to 1
--tol ''|invalid value '' for --tol: expected a number from 0 to 1
--tol ' 0.1'|invalid value ' 0.1' for --tol: expected a number from 0 to 1
--tol 0.1x|invalid value '0.1x' for --tol: expected a number from 0 to 1
--admm-tol 2|invalid value '2' for --admm-tol: expected a number from 0 to 1
--admm-tol -1e-9|invalid value '-1e-9' for --admm-tol: expected a number from 0 to 1
--l1 -1|invalid value '-1' for --l1: expected a number from 0 to 1e+300
--l2 1.1e300|invalid value '1.1e300' for --l2: expected a number from 0 to 1e+300
--l2 1e999|invalid value '1e999' for --l2: too large for a double (whose magnitudes run from 2.22507e-308 to 1.79769e+308, and 0); expected a number from 0 to 1e+300
--l1 0.1,-0.1|invalid value '-0.1' for --l1: expected a number from 0 to 1e+300
--l1 0.1,0.2|--l1 lists 2 values and the tensor has 3 modes: give one value, or one per mode
--l2 1,2,3,4|--l2 lists 4 values and the tensor has 3 modes: give one value, or one per mode
--l1 ''|--l1 needs a value
--l1 1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1|--l1: more than 32 values
EOF

# ---- amped-run: choices and lists --------------------------------------------------
while IFS='|' read -r args msg; do
    refused run "$args" "$msg"
done <<EOF
--constraint ''|--constraint needs none or nonneg
--constraint nonneg,positive|invalid value 'positive' for --constraint: expected one of 'none', 'nonneg'
--constraint NONNEG|invalid value 'NONNEG' for --constraint: expected one of 'none', 'nonneg'
--constraint nonneg,none|--constraint lists 2 values and the tensor has 3 modes: give one value, or one per mode
--method ALS|invalid value 'ALS' for --method: expected one of 'als', 'ao-admm', 'mu', 'hals', 'cp-apr', 'gcp'
--method ''|invalid value '' for --method: expected one of 'als', 'ao-admm', 'mu', 'hals', 'cp-apr', 'gcp'
--precision f16|invalid value 'f16' for --precision: expected one of 'f64', 'f32'
--format npz|invalid value 'npz' for --format: expected one of 'text', 'npy', 'ktensor'
--rows some|invalid value 'some' for --rows: expected one of 'all', 'nonempty'
--devices 0,,1|invalid value '0,,1' for --devices: expected up to 64 comma-separated integers from 0 to 63
--devices 0,|invalid value '0,' for --devices: expected up to 64 comma-separated integers from 0 to 63
--devices ,0|invalid value ',0' for --devices: expected up to 64 comma-separated integers from 0 to 63
--devices ''|invalid value '' for --devices: expected up to 64 comma-separated integers from 0 to 63
--devices 64|invalid value '64' for --devices: expected up to 64 comma-separated integers from 0 to 63
--devices -1|invalid value '-1' for --devices: expected up to 64 comma-separated integers from 0 to 63
--devices '0, 1'|invalid value '0, 1' for --devices: expected up to 64 comma-separated integers from 0 to 63
--devices 1,0,1|--devices: GPU 1 is listed twice
--send-parts 0|invalid value '0' for --send-parts: expected auto or an integer from 1 to 8
--send-parts 9|invalid value '9' for --send-parts: expected auto or an integer from 1 to 8
--device-memory 0|invalid value '0' for --device-memory: expected a size from 1 to 18446744073709551615 bytes (suffixes K, M, G, T allowed)
--device-memory 16777216T|invalid value '16777216T' for --device-memory: expected a size from 1 to 18446744073709551615 bytes (suffixes K, M, G, T allowed)
--host-memory 1KIB|invalid value '1KIB' for --host-memory: expected a size from 1 to 18446744073709551615 bytes (suffixes K, M, G, T allowed)
--host-memory 2P|invalid value '2P' for --host-memory: expected a size from 1 to 18446744073709551615 bytes (suffixes K, M, G, T allowed)
--host-memory 1.5G|invalid value '1.5G' for --host-memory: expected a size from 1 to 18446744073709551615 bytes (suffixes K, M, G, T allowed)
EOF
# The devices list at its longest (64 numbers) and one past it.
l=0 i=1
while test $i -lt 64; do l="$l,$i"; i=$((i + 1)); done
refused run "--devices $l,0" "invalid value '$l,0' for --devices: expected up to 64 comma-separated integers from 0 to 63"

# Each size form is taken on the command line too (the CPU warns that it
# ignores the option; the values themselves are checked in test_common).
for v in 1 1K 1k 1KB 1kB 1KiB 1kiB 2M 2m 2MiB 3G 3g 3GB 4T 4t 4TiB 16777215T \
    18446744073709551615; do
    run "$AMPED_RUN" -q -t 1 -r 2 --iters 1 --device-memory "$v" --host-memory="$v" "$T/s.amp"
    if test "$RUN_RC" = 0 && grep -q '^amped-run: warning: --device-memory applies to the GPU backend' "$RUN_ERR"; then
        pass "amped-run --device-memory $v --host-memory=$v: taken (and ignored on the CPU)"
    else
        fail "amped-run --device-memory $v --host-memory=$v: taken (and ignored on the CPU)"
        diag_run
    fi
done

# ---- amped-run: spellings --------------------------------------------------------
refused run "--admm=3" "option '--admm=3' is ambiguous; possibilities: '--admm-inner' '--admm-tol'"
# Last on the line, the option has no value (before the file, the file
# would be its value).
refused run-last "--rank" "option '--rank' requires an argument"
refused run-last "-r" "option requires an argument -- 'r'"
refused run "--rank $T/s.amp" "invalid value '$T/s.amp' for --rank: $R 1 to 4096"
refused run "--rank3" "unrecognized option '--rank3'"
refused run "--ran=3" "option '--ran=3' is ambiguous; possibilities: '--rank' '--ranks'"

# ---- amped-run: values that take effect ------------------------------------------
while IFS='|' read -r args key value; do
    takes "$args" "$key" "$value"
done <<EOF
-r 3|rank|3
-r3|rank|3
--rank=3|rank|3
--rank 3|rank|3
--iter=7|max_iters|7
-r 1|rank|1
-r 5 -r 2|rank|2
--mttkrp-only -r 4096|rank|4096
--iters 1000000 --tol 1|max_iters|1000000
--tol 1 --iters 3|tol|1
--tol 0|tol|0
--tol 0x1p-3|tol|0.125
--tol 1e-300|tol|1e-300
--seed 18446744073709551615|seed|18446744073709551615
--seed 0|seed|0
--seed=007|seed|7
-t 2|threads|2
--threads=1|threads|1
--method ao-admm --admm-inner 1|admm_inner|1
--method ao-admm --admm-inner=1000|admm_inner|1000
--method ao-admm --admm-tol 1|admm_tol|1
--l1 1e300 --method ao-admm|l1|[1.0000000000000001e+300, 1.0000000000000001e+300, 1.0000000000000001e+300]
--l1 0.5,0,2 --method ao-admm|l1|[0.5, 0, 2]
--l2=0.25 --method mu|l2|[0.25, 0.25, 0.25]
--l2 0,0,0 --method hals|l2|[0, 0, 0]
--constraint nonneg,none,nonneg --method hals|constraints|["nonneg", "none", "nonneg"]
--constraint none|constraints|["none", "none", "none"]
--method mu|constraints|["nonneg", "nonneg", "nonneg"]
--precision=f32|precision|"f32"
EOF

# ---- amped-prep --------------------------------------------------------------------
while IFS='|' read -r args msg; do
    refused prep "$args" "$msg"
done <<EOF
--threads 0|invalid value '0' for --threads: $R 1 to 4096
--threads 4097|invalid value '4097' for --threads: $R 1 to 4096
-t ''|invalid value '' for --threads: $R 1 to 4096
--shards 0|invalid value '0' for --shards: $R 1 to 1048576
--shards 1048577|invalid value '1048577' for --shards: $R 1 to 1048576
--chunk-nnz 0|invalid value '0' for --chunk-nnz: $R 1 to 268435456
--chunk-nnz 268435457|invalid value '268435457' for --chunk-nnz: $R 1 to 268435456
--chunk-nnz 1M|invalid value '1M' for --chunk-nnz: $R 1 to 268435456
--level -8|--level: '-8' is not an integer from -7 to 22
--level 23|--level: '23' is not an integer from -7 to 22
--level ''|--level: '' is not an integer from -7 to 22
--level 1.0|--level: '1.0' is not an integer from -7 to 22
--level ' 5'|--level: ' 5' is not an integer from -7 to 22
--level +5|--level: '+5' is not an integer from -7 to 22
--level -|--level: '-' is not an integer from -7 to 22
--level 99999999999999999999|--level: '99999999999999999999' is not an integer from -7 to 22
--dims 0,1,1|invalid value '0,1,1' for --dims: expected up to 32 comma-separated integers from 1 to 9223372036854775807
--dims 3,,4|invalid value '3,,4' for --dims: expected up to 32 comma-separated integers from 1 to 9223372036854775807
--dims ,3,4,5|invalid value ',3,4,5' for --dims: expected up to 32 comma-separated integers from 1 to 9223372036854775807
--dims 3,4,5,|invalid value '3,4,5,' for --dims: expected up to 32 comma-separated integers from 1 to 9223372036854775807
--dims 9223372036854775808,4,5|invalid value '9223372036854775808,4,5' for --dims: expected up to 32 comma-separated integers from 1 to 9223372036854775807
--index-base 2|invalid value '2' for --index-base: expected one of 'auto', '0', '1'
--duplicates max|invalid value 'max' for --duplicates: expected one of 'sum', 'keep', 'error'
--values f16|invalid value 'f16' for --values: expected one of 'auto', 'f32', 'f64'
--input-format csv|invalid value 'csv' for --input-format: expected one of 'auto', 'tns', 'bin'
EOF
d=1 i=1
while test $i -lt 33; do d="$d,1"; i=$((i + 1)); done
refused prep "--dims $d" "invalid value '$d' for --dims: expected up to 32 comma-separated integers from 1 to 9223372036854775807"

# prep_takes 'ARGS' TEXT: amped-prep ARGS -o s2.amp, then --info shows a
# line with TEXT.
prep_takes() {
    _args=$1 _text=$2
    eval "set -- $_args"
    rm -f "$T/s2.amp"
    run "$AMPED_PREP" -q "$@" -o "$T/s2.amp" "$T/s.tns"
    if test "$RUN_RC" = 0; then
        run "$AMPED_RUN" --info "$T/s2.amp"
        check_contains "amped-prep $_args: --info shows $_text" "$RUN_OUT" "$_text"
    else
        fail "amped-prep $_args: exits 0"
        diag_run
    fi
}
while IFS='|' read -r args text; do
    prep_takes "$args" "$text"
done <<EOF
--shards 1|mode 1      1 shards
--shards=1048576 --chunk-nnz 1|chunk-nnz=1 values=auto
--chunk-nnz 268435456|chunk-nnz=268435456 values
--level -7|level=-7 
--level=22|level=22 
--level 0|level=0 
--values f64|values=f64 
--dims 3,3,4|dims:       3 x 3 x 4
--dims=9223372036854775807,3,4|dims:       9223372036854775807 x 3 x 4
EOF

done_testing
