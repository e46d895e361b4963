#!/bin/sh
# Build the three kernels with their crocoddyl headers (rbdgen build ... --crocoddyl), then
# the examples against crocoddyl's and Pinocchio's wheels (cmeel.prefix), and run them.
#   sh examples/crocoddyl/cpp/run.sh [--T N] [--repeat N]
# WORK: build folder (default /tmp/rbdgen-crocoddyl); CMAKE_ARGS: more cmake configure arguments
# (the tests build at -O0: -DCMAKE_BUILD_TYPE=None -DCMAKE_C_FLAGS=-O0 -DCMAKE_CXX_FLAGS=-O0);
# CMAKE_BUILD_PARALLEL_LEVEL: compile jobs (default 1: an example's C++ takes about 1.8 GB);
# RBDGEN_KERNELS: a folder of kernel folders panda/, solo12/, talos/ already made
# (problems.cpp_kernel_folders: the Python examples' Pinocchio models), not rebuilt here.
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=${WORK:-/tmp/rbdgen-crocoddyl}
PYTHON=${PYTHON:-python3}
RBDGEN=${RBDGEN:-"$PYTHON -m gen.cli"}
PREFIX=$($PYTHON -c "import cmeel, sys; print(cmeel.__path__[0] + '.prefix')" 2>/dev/null || \
         $PYTHON -c "import sysconfig; print(sysconfig.get_paths()['purelib'] + '/cmeel.prefix')")
mkdir -p "$WORK"
K=${RBDGEN_KERNELS:-$WORK}
if [ -z "${RBDGEN_KERNELS:-}" ]; then
    $RBDGEN build panda -a aba_derivatives --crocoddyl -o "$K/panda" -q > "$WORK/rbdgen.log"
    $RBDGEN build solo12 -a constrained_derivatives -c 3D:FL_FOOT,3D:FR_FOOT,3D:HL_FOOT,3D:HR_FOOT \
        --baumgarte 0,50 --crocoddyl -o "$K/solo12" -q >> "$WORK/rbdgen.log"
    $RBDGEN build "$PREFIX/share/example-robot-data/robots/talos_data/robots/talos_reduced.urdf" --floating-base \
        -a constrained_derivatives -c 6D:left_sole_link,6D:right_sole_link --baumgarte 0,50 --crocoddyl \
        -o "$K/talos" -q >> "$WORK/rbdgen.log"
fi
cmake -S "$HERE" -B "$WORK/build" -DCMAKE_PREFIX_PATH="$PREFIX" -DRBDGEN_PANDA="$K/panda" \
    -DRBDGEN_SOLO12="$K/solo12" -DRBDGEN_TALOS="$K/talos" -DROBOTS_DIR="$PREFIX/share/example-robot-data/robots" \
    ${CMAKE_ARGS:-} > "$WORK/build.log" 2>&1
cmake --build "$WORK/build" -j "${CMAKE_BUILD_PARALLEL_LEVEL:-1}" >> "$WORK/build.log" 2>&1
export LD_LIBRARY_PATH="$PREFIX/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive} OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
"$WORK/build/panda" "$@"
"$WORK/build/solo12" "$@"
"$WORK/build/talos" "$@"
