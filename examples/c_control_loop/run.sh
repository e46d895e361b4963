#!/bin/sh
# Generate the kernels of the control loop with the rbdgen CLI, build and install each
# as a CMake package, build control_loop.c against the installed packages and run it.
#
#   examples/c_control_loop/run.sh [SECONDS]      simulated seconds per robot (default 5)
#
# Environment: RBDGEN  the rbdgen command (default: rbdgen; e.g. "python -m gen.cli")
#              WORK    where kernels, builds and the install prefix go (default: ./build
#                      next to this script); the kernels are installed in $WORK/prefix.
# The build steps' output goes to $WORK/build.log; the loop's report to stdout.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
seconds=${1:-5}
work=${WORK:-$here/build}
rbdgen=${RBDGEN:-rbdgen}
prefix=$work/prefix
log=$work/build.log
mkdir -p "$work"
: > "$log"

# kernel NAME RBDGEN-BUILD-ARGS...: generate into $work/kernels/NAME, build, install
kernel() {
    name=$1
    shift
    echo "kernel $name: rbdgen build $*" >&2
    $rbdgen build "$@" --out "$work/kernels/$name" --quiet >> "$log"
    cmake -S "$work/kernels/$name" -B "$work/cmake/$name" >> "$log"
    cmake --build "$work/cmake/$name" >> "$log"
    cmake --install "$work/cmake/$name" --prefix "$prefix" >> "$log"
}

kernel panda_rnea panda -a rnea
kernel panda_aba panda -a aba
# The feet are held by velocity-level Baumgarte damping (Kd = 100, Kp = 0): the CLI
# anchors world constraints at the origin, so a position gain would pull the feet there.
kernel solo12_feet solo12 -a constrained_aba -c 3D:FL_FOOT,3D:FR_FOOT,3D:HL_FOOT,3D:HR_FOOT --baumgarte 0,100 \
    --prefix rbd_solo12_feet

echo "control_loop: find_package in $prefix" >&2
cmake -S "$here" -B "$work/cmake/control_loop" -DCMAKE_PREFIX_PATH="$prefix" >> "$log"
cmake --build "$work/cmake/control_loop" >> "$log"
exec "$work/cmake/control_loop/control_loop" "$seconds"
