#!/usr/bin/env bash
# amped under MPI on a GPU machine that has no MPI installed: Debian's
# OpenMPI carried along, unpacked, and pointed at with PATH,
# LD_LIBRARY_PATH and OPAL_PREFIX.
#
#   bench/mpi-gpu.sh carry [DIR]        here (Debian 12, apt): download
#                                       OpenMPI's .debs, unpack them in DIR
#                                       (default: mpi-carry/ in the source
#                                       tree, ignored by git)
#   bench/mpi-gpu.sh run BUILD [DIR]    there: BUILD is a build directory
#                                       configured with CUDA, NCCL and MPI
#                                       (built here), DIR the unpacked tree
#
# What `run` does, each step printed with its command:
#   1. the carried mpirun starts 2 processes (hostname, and amped-run -V);
#   2. the CPU backend under MPI (--gpus 0): 1 process against 2, the
#      same fits (AMP_TENSOR, default the bundled sample);
#   3. NCCL bootstrapped over MPI (bench/mpi-nccl): 2 processes of 1 GPU
#      against 1 process of 2 GPUs, the collectives checked and the rows'
#      exchange timed (AMP_ROWS rows of rank 32, default 4194304), then
#      the same with NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1, which forces
#      NCCL onto its network transport as between hosts;
#   4. the reference amped-run on 1 and 2 GPUs of one process (AMP_TENSOR);
#   5. amped-run on GPUs under MPI: tests/mpi_gpu.sh (2 processes of 1 GPU
#      against 1 process of 2 GPUs and the CPU, failures, and the times
#      with AMP_TENSOR; see that script).
# Exit status 1 when a check fails.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
what=${1:-}
PKGS="openmpi-bin openmpi-common libopenmpi3 libpmix2 libhwloc15 libhwloc-plugins
libevent-core-2.1-7 libevent-pthreads-2.1-7 libfabric1 libucx0 libibverbs1 ibverbs-providers
librdmacm1 libnl-3-200 libnl-route-3-200 libnuma1 libpsm2-2 libpsm-infinipath1 libmunge2
libpciaccess0 libltdl7 libxnvctrl0"

case $what in
carry)
    dir=${2:-$here/mpi-carry}
    mkdir -p "$dir/debs" "$dir/root" || exit 1
    # The packages and the libraries they need beyond a base system
    # (apt-cache depends --recurse openmpi-bin, less what every Debian or
    # Ubuntu has: libc, libstdc++, zlib, libssl, libudev).
    # shellcheck disable=SC2086
    (cd "$dir/debs" && apt-get download $PKGS) || exit 1
    for deb in "$dir"/debs/*.deb; do
        dpkg -x "$deb" "$dir/root" || exit 1
    done
    # dpkg -x makes no alternatives: the launcher under its own name.
    ln -sf mpirun.openmpi "$dir/root/usr/bin/mpirun"
    ln -sf mpicc.openmpi "$dir/root/usr/bin/mpicc" 2>/dev/null
    rm -rf "$dir/debs"
    echo "carried: $dir ($(du -sh "$dir" | cut -f1)); on the GPU machine: bench/mpi-gpu.sh run BUILD $dir"
    exit 0
    ;;
run) ;;
*)
    sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'
    exit 2
    ;;
esac

build=${2:?"usage: bench/mpi-gpu.sh run BUILD [DIR]"}
build=$(cd "$build" && pwd) || exit 1
mpi_carry=$(cd "${3:-$here/mpi-carry}" && pwd) || exit 1
. "$here/bench/mpi-carry.sh"
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
MPIRUN="mpirun --oversubscribe --bind-to none"
for v in $MPI_CARRY_VARS; do MPIRUN="$MPIRUN -x $v"; done
RUN=$build/amped-run
failed=0

step() { printf '\n==== %s\n' "$*"; }
say() { echo "\$ $*"; "$@"; }
bad() { echo "FAILED: $*"; failed=1; }

step "1. the carried OpenMPI"
say mpirun --version || bad "mpirun does not start"
say $MPIRUN -np 2 hostname || bad "mpirun -np 2 hostname"
say $MPIRUN -np 2 "$RUN" -V | grep -E '^(MPI|NCCL|CUDA)' || bad "amped-run -V under mpirun"
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L

step "2. the CPU backend under MPI"
amp=$build/mpi-gpu.amp
tensor=${AMP_TENSOR:-$here/data/sample.tns.zst}
case $tensor in
*.amp) amp=$tensor ;;
*) say "$build/amped-prep" -q -f -o "$amp" "$tensor" || bad "amped-prep $tensor" ;;
esac
say "$RUN" -q --gpus 0 -r 16 --iters 10 --tol 0 --json "$build/mpi-one.json" "$amp" ||
    bad "one process"
say $MPIRUN -np 2 "$RUN" --gpus 0 -r 16 --iters 10 --tol 0 --json "$build/mpi-two.json" "$amp" ||
    bad "two processes"
# Each iteration's fit, not the fit phase's seconds later on its line.
fits() { sed -n 's/.*{"iter": [0-9]*, "fit": \([^,]*\),.*/\1/p' "$1"; }
fits "$build/mpi-one.json" >"$build/mpi-one.fits"
fits "$build/mpi-two.json" >"$build/mpi-two.fits"
# No fits read (a JSON this pattern no longer matches) or fewer on one
# side is a failure, not a difference of 0.
gap=$(paste "$build/mpi-one.fits" "$build/mpi-two.fits" |
    awk '$1 == "" || $2 == "" { bad = 1 } { n++; d = $1 - $2; d = d < 0 ? -d : d; if (d > m) m = d }
         END { if (bad || n == 0) print "unread"; else printf "%.3g", m + 0 }')
echo "largest fit difference, 1 against 2 processes: $gap"
test "$gap" != unread && awk -v g="$gap" 'BEGIN { exit !(g <= 1e-9) }' || bad "fits: $gap"

step "3. NCCL over MPI: the bootstrap, the collectives, the rows' exchange"
rows=${AMP_ROWS:-4194304}
nccl() {   # label, env..., -- mpirun args
    label=$1
    shift
    echo "-- $label"
    say env "$@" || bad "$label"
}
nccl "2 processes x 1 GPU" $MPIRUN -np 2 "$build/bench/mpi-nccl" 1 "$rows" 32 10
nccl "1 process x 2 GPUs" $MPIRUN -np 1 "$build/bench/mpi-nccl" 2 "$rows" 32 10
nccl "2 processes x 1 GPU, NCCL's network transport" NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 \
    $MPIRUN -x NCCL_P2P_DISABLE -x NCCL_SHM_DISABLE -np 2 "$build/bench/mpi-nccl" 1 "$rows" 32 10
nccl "1 process x 2 GPUs, NCCL's network transport" NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 \
    $MPIRUN -x NCCL_P2P_DISABLE -x NCCL_SHM_DISABLE -np 1 "$build/bench/mpi-nccl" 2 "$rows" 32 10

step "4. the reference: amped-run on 1 and 2 GPUs of one process (rows by NCCL, as across processes)"
say "$RUN" -r 32 --iters 10 --tol 0 --gpus 1 "$amp" | grep -E '^(final fit|time|  +[0-9]+ )' | tail -4 ||
    bad "one GPU"
say "$RUN" -r 32 --iters 10 --tol 0 --gpus 2 --exchange nccl "$amp" | grep -E '^(final fit|time|  +[0-9]+ )' | tail -4 ||
    bad "two GPUs"

step "5. amped-run on GPUs under MPI (tests/mpi_gpu.sh)"
sh "$here/tests/mpi_gpu.sh" "$build" "$mpi_carry" || bad "tests/mpi_gpu.sh"

echo
test "$failed" -eq 0 && echo "mpi-gpu: every step passed" || echo "mpi-gpu: some step FAILED"
exit "$failed"
