# Sourced (sh): point the environment at OpenMPI unpacked by
# `bench/mpi-gpu.sh carry` in $mpi_carry (its root/ below), for a machine
# that has no MPI of its own. Sets and exports PATH, LD_LIBRARY_PATH,
# OPAL_PREFIX and PMIx's two variables; MPI_CARRY_VARS names those that
# mpirun must pass on (-x) to the processes it starts.
mpi_root=$(cd "$mpi_carry/root" && pwd)
mpi_multi=x86_64-linux-gnu
PATH=$mpi_root/usr/bin:$PATH
LD_LIBRARY_PATH=$mpi_root/usr/lib/$mpi_multi:$mpi_root/usr/lib/$mpi_multi/openmpi/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# OpenMPI finds its components, help texts and orted under its prefix:
# the unpacked tree's, not /usr.
OPAL_PREFIX=$mpi_root/usr
# PMIx looks for its plugins under the path it was built with, where a
# host may hold another PMIx's (undefined symbols): the carried ones, and
# no warning when the compression plugin is missing.
PMIX_MCA_mca_base_component_path=$mpi_root/usr/lib/$mpi_multi/pmix2/lib/pmix
PMIX_MCA_pcompress_base_silence_warning=1
export PATH LD_LIBRARY_PATH OPAL_PREFIX PMIX_MCA_mca_base_component_path \
    PMIX_MCA_pcompress_base_silence_warning
MPI_CARRY_VARS="LD_LIBRARY_PATH OPAL_PREFIX PMIX_MCA_mca_base_component_path PMIX_MCA_pcompress_base_silence_warning"
