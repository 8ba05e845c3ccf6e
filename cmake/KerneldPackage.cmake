# Relocatable binary package (CPack TGZ).
#
#   cmake --build build --target package
#     -> build/kerneld-<version>-Linux-x86_64.tar.gz
#
#   kerneld-<version>-Linux-x86_64/
#     bin/     kerneld, kernelctl              RPATH $ORIGIN/../lib
#     tests/   gpu test binaries (CUDA builds)
#     bench/   benchmarks
#     lib/     every shared library those binaries need that is not part of
#              glibc, the NVIDIA driver or the CUDA toolkit: gRPC, protobuf,
#              abseil, prometheus-cpp, civetweb, re2, c-ares, OpenSSL, zlib,
#              libstdc++, libgcc_s (curl and others when something links them)
#     README.package
#
# The package runs on any x86-64 Linux with glibc >= the build machine's
# (2.36 for Debian 12) and nothing else installed. The CUDA libraries are not
# bundled: the CUDA backend links the CUDA runtime statically and finds the
# driver (libcuda.so.1) on the loader path; backends that need toolkit
# libraries (cublas: libcublas/libcublasLt; nvrtc) expect them on the loader
# path, typically LD_LIBRARY_PATH=/usr/local/cuda/lib64.
#
# scripts/package_check builds, unpacks and smoke-tests the package (also the
# ctest `package_check`, label package); scripts/device_bundle unpacks it into
# .device/kerneld for the GPU machine. `package` is not part of `all`.
# Installing with `cmake --install` into a private prefix bundles the same way
# (KERNELD_BUNDLE_LIBS, below).
include_guard(GLOBAL)

# ---- RPATH that also covers the bundled libraries' own dependencies ---------
#
# The executables carry $ORIGIN/../lib (CMAKE_INSTALL_RPATH). With the linker's
# default DT_RUNPATH that path is searched for the executable's direct
# dependencies only: libgrpc++ looking for libgrpc, or libgrpc for
# libabsl_*, would fall back to the system and fail where gRPC is not
# installed. DT_RPATH (--disable-new-dtags) of the executable is searched for
# the whole dependency tree (of every library that has no RUNPATH of its own,
# which is every Debian library), so one RPATH serves lib/.
function(_kerneld_all_targets dir out)
  get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    _kerneld_all_targets("${sub}" sub_targets)
    list(APPEND targets ${sub_targets})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

if(CMAKE_SYSTEM_NAME STREQUAL "Linux")
  _kerneld_all_targets("${PROJECT_SOURCE_DIR}" _kerneld_targets)
  foreach(_t IN LISTS _kerneld_targets)
    get_target_property(_type ${_t} TYPE)
    if(_type STREQUAL "EXECUTABLE" OR _type STREQUAL "SHARED_LIBRARY" OR _type STREQUAL "MODULE_LIBRARY")
      set_property(TARGET ${_t} APPEND PROPERTY LINK_OPTIONS "LINKER:--disable-new-dtags")
    endif()
  endforeach()
endif()

# ---- bundled shared libraries ----------------------------------------------
#
# At install time, after every install(TARGETS) rule (CMP0082 orders rules
# as written; this file is included last), the installed executables are
# scanned with file(GET_RUNTIME_DEPENDENCIES) and each library they need is
# copied into lib/ under the name the loader asks for (its SONAME), as a
# plain file (no symlinks: the bundle is copied by tools that drop them).

# AUTO: bundle unless installing into a system prefix (/, /usr, /usr/local),
# where copying libstdc++ or OpenSSL into <prefix>/lib would shadow the
# system's own for every program. CPack stages into a private directory, so
# the package is always bundled.
set(KERNELD_BUNDLE_LIBS "AUTO" CACHE STRING
    "Copy the non-system shared libraries into <prefix>/lib at install time: AUTO, ON, OFF")
set_property(CACHE KERNELD_BUNDLE_LIBS PROPERTY STRINGS AUTO ON OFF)

# Directories of the install tree whose files are executables to scan.
set(KERNELD_PACKAGE_EXE_DIRS bin tests bench CACHE STRING
    "Install-tree directories whose executables the package bundles libraries for")
mark_as_advanced(KERNELD_PACKAGE_EXE_DIRS)

# Names (as in DT_NEEDED) that are never bundled.
set(_kerneld_pkg_exclude_names
  # glibc and the loader: the target system's own, matching its kernel.
  "^ld-linux.*[.]so" "^linux-vdso[.]so" "^libc[.]so" "^libm[.]so" "^libmvec[.]so"
  "^libdl[.]so" "^librt[.]so" "^libpthread[.]so" "^libresolv[.]so" "^libutil[.]so"
  "^libanl[.]so" "^libnsl[.]so" "^libBrokenLocale[.]so" "^libnss_.*[.]so" "^libthread_db[.]so"
  "^libc_malloc_debug[.]so"
  # NVIDIA driver: must match the kernel module of the machine.
  "^libcuda[.]so" "^libnvidia-.*[.]so" "^libnvcuvid[.]so" "^libnvoptix[.]so"
  # CUDA toolkit: expected on the loader path (/usr/local/cuda/lib64).
  "^libcudart[.]so" "^libcublas[.]so" "^libcublasLt[.]so" "^libnvrtc.*[.]so"
  "^libnvJitLink[.]so" "^libnvToolsExt[.]so" "^libnvml[.]so" "^libcufft.*[.]so"
  "^libcurand[.]so" "^libcusparse.*[.]so" "^libcusolver.*[.]so" "^libcupti[.]so"
  "^libnvptxcompiler.*[.]so" "^libnvfatbin[.]so")
# Resolved paths that are never bundled (whatever the name). Regexes without
# backslashes: they travel into the install script inside a quoted string.
set(_kerneld_pkg_exclude_paths "^/usr/local/cuda" "/cuda[-0-9.]*/(targets/[^/]+/)?lib" "/nvidia/")

string(JOIN "\" \"" _kerneld_pkg_exclude_names_q ${_kerneld_pkg_exclude_names})
string(JOIN "\" \"" _kerneld_pkg_exclude_paths_q ${_kerneld_pkg_exclude_paths})
string(JOIN "\" \"" _kerneld_pkg_exe_dirs_q ${KERNELD_PACKAGE_EXE_DIRS})

# The install-time script (generated: the values above are baked in).
file(CONFIGURE OUTPUT "${PROJECT_BINARY_DIR}/kerneld_bundle.cmake" @ONLY CONTENT [[
# Generated by cmake/KerneldPackage.cmake: bundles the shared libraries of
# the installed executables into <prefix>/lib.
set(_kd_bundle "@KERNELD_BUNDLE_LIBS@")
if(_kd_bundle STREQUAL "AUTO")
  get_filename_component(_kd_prefix "${CMAKE_INSTALL_PREFIX}" ABSOLUTE)
  if(_kd_prefix MATCHES "^/(usr(/local)?)?/?$")
    message(STATUS "kerneld: not bundling shared libraries into the system prefix ${_kd_prefix} "
                   "(-DKERNELD_BUNDLE_LIBS=ON forces it)")
    return()
  endif()
elseif(_kd_bundle STREQUAL "OFF")
  return()
endif()

set(_kd_root "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}")
set(_kd_exes)
foreach(_dir IN ITEMS "@_kerneld_pkg_exe_dirs_q@")
  file(GLOB _files LIST_DIRECTORIES false "${_kd_root}/${_dir}/*")
  foreach(_f IN LISTS _files)
    if(NOT IS_SYMLINK "${_f}")
      file(READ "${_f}" _magic LIMIT 4 HEX)
      if(_magic STREQUAL "7f454c46")  # ELF
        list(APPEND _kd_exes "${_f}")
      endif()
    endif()
  endforeach()
endforeach()
if(NOT _kd_exes)
  message(FATAL_ERROR "kerneld package: no executables under ${_kd_root}")
endif()

if(NOT CMAKE_GET_RUNTIME_DEPENDENCIES_PLATFORM)
  set(CMAKE_GET_RUNTIME_DEPENDENCIES_PLATFORM "linux+elf")
endif()
if(NOT CMAKE_GET_RUNTIME_DEPENDENCIES_TOOL)
  set(CMAKE_GET_RUNTIME_DEPENDENCIES_TOOL "objdump")
endif()
if(NOT CMAKE_GET_RUNTIME_DEPENDENCIES_COMMAND AND EXISTS "@CMAKE_OBJDUMP@")
  set(CMAKE_GET_RUNTIME_DEPENDENCIES_COMMAND "@CMAKE_OBJDUMP@")
endif()
file(GET_RUNTIME_DEPENDENCIES
  EXECUTABLES ${_kd_exes}
  RESOLVED_DEPENDENCIES_VAR _kd_deps
  UNRESOLVED_DEPENDENCIES_VAR _kd_unresolved
  CONFLICTING_DEPENDENCIES_PREFIX _kd_conflicts
  PRE_EXCLUDE_REGEXES "@_kerneld_pkg_exclude_names_q@"
  POST_EXCLUDE_REGEXES "@_kerneld_pkg_exclude_paths_q@")
if(_kd_unresolved)
  message(FATAL_ERROR "kerneld package: cannot resolve ${_kd_unresolved}")
endif()
foreach(_name IN LISTS _kd_conflicts_FILENAMES)
  list(GET _kd_conflicts_${_name} 0 _first)
  message(WARNING "kerneld package: ${_name} found as ${_kd_conflicts_${_name}}; bundling ${_first}")
  list(APPEND _kd_deps "${_first}")
endforeach()

# Each library as a plain file named as the loader asks for it (its SONAME).
set(_kd_lib "${CMAKE_INSTALL_PREFIX}/lib")
list(REMOVE_DUPLICATES _kd_deps)
list(SORT _kd_deps)
foreach(_dep IN LISTS _kd_deps)
  get_filename_component(_name "${_dep}" NAME)
  get_filename_component(_real "${_dep}" REALPATH)
  file(INSTALL DESTINATION "${_kd_lib}" TYPE FILE FILES "${_real}" RENAME "${_name}"
       PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                   WORLD_READ WORLD_EXECUTE)
  if(CMAKE_INSTALL_DO_STRIP AND EXISTS "@CMAKE_STRIP@")
    execute_process(COMMAND "@CMAKE_STRIP@" --strip-unneeded "$ENV{DESTDIR}${_kd_lib}/${_name}"
                    COMMAND_ERROR_IS_FATAL ANY)
  endif()
endforeach()
list(LENGTH _kd_deps _n)
message(STATUS "kerneld package: bundled ${_n} shared libraries into ${_kd_lib}")
file(INSTALL DESTINATION "${CMAKE_INSTALL_PREFIX}" TYPE FILE FILES "@PROJECT_BINARY_DIR@/README.package")
]])
# After every install(TARGETS) rule: CMP0082 runs install rules in the order
# they were written, subdirectories included, and this file comes last.
install(SCRIPT "${PROJECT_BINARY_DIR}/kerneld_bundle.cmake")

# ---- notes shipped with the package -----------------------------------------
# Does this build link CUDA toolkit libraries (the cublas backend)?
set(_kerneld_pkg_toolkit_note "")
if(TARGET kerneld_kernels_archive)
  get_target_property(_kerneld_libs kerneld_kernels_archive INTERFACE_LINK_LIBRARIES)
  if(_kerneld_libs MATCHES "cublas|nvrtc")
    set(_kerneld_pkg_toolkit_note "
THIS BUILD LINKS CUDA TOOLKIT LIBRARIES (${CMAKE_MATCH_0}): bin/kerneld and the
tests start only where the loader finds them, e.g.

  LD_LIBRARY_PATH=/usr/local/cuda/lib64 bin/kerneld
")
  endif()
endif()
set(_kerneld_pkg_readme "${PROJECT_BINARY_DIR}/README.package")
file(WRITE "${_kerneld_pkg_readme}" "kerneld ${PROJECT_VERSION} (${KERNELD_GIT_REVISION}), CUDA backend: ${KERNELD_WITH_CUDA}
${_kerneld_pkg_toolkit_note}
A relocatable build: unpack anywhere and run bin/kerneld. bin/ and tests/
find their libraries in lib/ through RPATH \$ORIGIN/../lib; nothing but
glibc (>= the build machine's) is needed from the system.

Not bundled, taken from the system when present:
  - glibc and the loader (libc, libm, libdl, librt, libpthread, libresolv, ld-linux);
  - the NVIDIA driver (libcuda.so.1, libnvidia-*): without it kerneld serves
    from its CPU backend and `kernelctl info` says why;
  - CUDA toolkit libraries (libcublas, libcublasLt, libcudart, libnvrtc). The
    CUDA runtime is linked statically; when a backend that needs toolkit
    libraries (cublas, nvrtc) is built in, start kerneld with them on the
    loader path:

      LD_LIBRARY_PATH=/usr/local/cuda/lib64 bin/kerneld --listen 127.0.0.1:50051

Try it:
  bin/kerneld --listen 127.0.0.1:50051 &
  bin/kernelctl --target 127.0.0.1:50051 run scale --dtype float16 --shape 4096 --attr factor=2 --check
")

# ---- ctest: the package smoke test (a few seconds) ----------------------------
# Installs the tree as built into a temp dir exactly as CPack stages it
# (stripped, libraries bundled; no build step, no tarball) and runs
# scripts/package_check on it, kept in <build>/package-check-install: the
# Dockerfile's install step is this command (docs/deploy.md).
if(KERNELD_BUILD_TESTS AND CMAKE_SYSTEM_NAME STREQUAL "Linux")
  add_test(NAME package_check
           COMMAND "${PROJECT_SOURCE_DIR}/scripts/package_check" --install-from "${PROJECT_BINARY_DIR}"
                   --keep "${PROJECT_BINARY_DIR}/package-check-install")
  set_tests_properties(package_check PROPERTIES LABELS package TIMEOUT 120 RUN_SERIAL TRUE)
endif()

# ---- CPack --------------------------------------------------------------------
set(CPACK_GENERATOR "TGZ")
set(CPACK_SOURCE_GENERATOR "")
set(CPACK_PACKAGE_NAME "kerneld")
set(CPACK_PACKAGE_VENDOR "kerneld")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "kerneld: CUDA kernels behind a gRPC API")
set(CPACK_PACKAGE_FILE_NAME "kerneld-${PROJECT_VERSION}-${CMAKE_SYSTEM_NAME}-${CMAKE_SYSTEM_PROCESSOR}")
set(CPACK_INCLUDE_TOPLEVEL_DIRECTORY ON)
set(CPACK_STRIP_FILES TRUE)  # installed executables: CMAKE_INSTALL_DO_STRIP
set(CPACK_VERBATIM_VARIABLES ON)
include(CPack)
