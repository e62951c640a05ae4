# SPDX-License-Identifier: MIT
# Cross build for 64-bit ARM Linux with Debian's gcc-aarch64-linux-gnu, the
# programs run under qemu-user (ctest goes through CMAKE_CROSSCOMPILING_EMULATOR).
# cmocka comes from Debian multiarch: dpkg --add-architecture arm64;
# apt-get install libcmocka-dev:arm64 (.ci/platforms.sh stage_arm64 does it).
#   cmake -S . -B build-arm64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DQG_BUILD_APPS=OFF
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(QG_CROSS_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${QG_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${QG_CROSS_TRIPLE}-g++)

# Headers and libraries of the target: the cross toolchain's sysroot and the
# multiarch arm64 packages under /usr (their files live in */aarch64-linux-gnu
# folders, so the host's x86-64 libraries are never picked).
set(CMAKE_FIND_ROOT_PATH /usr/${QG_CROSS_TRIPLE})
set(CMAKE_LIBRARY_ARCHITECTURE ${QG_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)

# pkg-config reads only the arm64 .pc files (cmocka.pc of libcmocka-dev:arm64).
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/${QG_CROSS_TRIPLE}/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")

# ctest runs every test program through qemu, which finds the arm64 loader
# and libc under -L.
find_program(QG_QEMU_AARCH64 NAMES qemu-aarch64 qemu-aarch64-static REQUIRED)
set(CMAKE_CROSSCOMPILING_EMULATOR ${QG_QEMU_AARCH64} -L /usr/${QG_CROSS_TRIPLE})
