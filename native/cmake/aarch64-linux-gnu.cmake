# A CMake toolchain file for AArch64 Linux with Debian's cross compiler (g++-aarch64-linux-gnu): the build of the
# app library closest to a phone's that runs here (in an AArch64 userland under qemu).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
