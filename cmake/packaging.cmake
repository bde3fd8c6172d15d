# Debian packages from the install rules (CPack's DEB generator), one per
# install component:
#   loom          component "loom", the default one: the CLI, libloom.so.0,
#                 the plug-ins and preload libraries in <libdir>/loom, and
#                 whatever else is installed without a COMPONENT (man pages,
#                 shell completion)
#   libloom-dev   component "dev": headers, libloom.so, pkg-config and CMake
#                 package files, the backend guide, the examples' sources
#   python3-loom  component "python": the Python package
# Components "kineto" (the bridge links a libkineto from outside any Debian
# package) and "examples" (the example plug-in's fake device) are not
# packaged.  scripts/debs.sh configures a build for /usr and runs cpack;
# cmake/debdeps.cmake computes each package's Depends with dpkg-shlibdeps.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME loom)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "loom maintainers <maintainers@loom.invalid>")
# The project's one-line summary would be prepended to every package's
# description; CPack leaves its own default out, so each package keeps its own.
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${CMAKE_PROJECT_NAME} built using CMake")
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL loom dev)
if(LOOM_PYTHON_BUILT)
  list(APPEND CPACK_COMPONENTS_ALL python)
endif()
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)
set(CPACK_COMPONENT_DEV_DEPENDS loom)
set(CPACK_COMPONENT_PYTHON_DEPENDS loom)
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})

set(CPACK_DEBIAN_LOOM_PACKAGE_NAME loom)
set(CPACK_DEBIAN_LOOM_PACKAGE_SECTION devel)
# The plug-ins this build has, with what each needs at run time.
set(_needs "")
foreach(p IN ITEMS
    "loom-cupti|CUDA|NVIDIA's driver and CUPTI (CUDA toolkit)"
    "loom-levelzero|Level Zero|libze1 and a Level Zero driver"
    "loom-opencl|OpenCL|an ICD loader with layers (ocl-icd-libopencl1)"
    "loom-vulkan|Vulkan|libvulkan1 and a Vulkan driver"
    "loom-mpi|MPI|Open MPI (openmpi-bin)"
    "loom-pytorch-shim|PyTorch ops|libtorch1.13 (python3-torch)"
    "loom-nvtx|NVTX ranges|a program using NVTX"
    "loom-itt|ITT ranges|a program using ITT"
    "loom-perf|CPU samples|perf_event_open allowed (kernel.perf_event_paranoid)")
  string(REPLACE "|" ";" p "${p}")
  list(GET p 0 target)
  list(GET p 1 what)
  list(GET p 2 need)
  if(TARGET ${target})
    string(APPEND _needs "\n  ${what}: ${need}")
  endif()
endforeach()
set(CPACK_DEBIAN_LOOM_DESCRIPTION "vendor-neutral activity profiler
loom records host activity (ranges, framework ops, counters) and device
activity from any number of backends on one timeline, and writes Chrome
trace JSON (Perfetto UI, chrome://tracing, Holistic Trace Analysis) or
Perfetto protobuf.  `loom record -- ./app` records a program; `loom report`
analyses a trace.
.
The plug-ins in ${CMAKE_INSTALL_FULL_LIBDIR}/loom load their runtime only
when a program uses it: none needs it installed, and a device whose runtime
is missing is left out without a warning (unless --devices names it).
What each device needs:${_needs}
.
python3-loom is the Python module; libloom-dev is for building against
libloom and for writing plug-ins.")
set(CPACK_DEBIAN_LOOM_PACKAGE_SUGGESTS
    "python3-loom, libloom-dev, ocl-icd-libopencl1, libvulkan1, libze1, openmpi-bin")

set(CPACK_DEBIAN_DEV_PACKAGE_NAME libloom-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_DESCRIPTION "vendor-neutral activity profiler (development files)
Headers for libloom's API and its plug-in ABI (loom/loom.h, loom/plugin.h),
libloom.so, pkg-config (loom.pc) and CMake (find_package(loom)) files, the
guide to writing a backend in /usr/share/doc/loom and the example plug-ins'
sources in /usr/share/loom/examples.")
set(CPACK_DEBIAN_DEV_PACKAGE_SUGGESTS "pkg-config, cmake")

set(CPACK_DEBIAN_PYTHON_PACKAGE_NAME python3-loom)
set(CPACK_DEBIAN_PYTHON_PACKAGE_SECTION python)
set(CPACK_DEBIAN_PYTHON_DESCRIPTION "vendor-neutral activity profiler (Python 3 module)
The loom module: record a Python program's host and device activity with
loom.profile(), annotate it with loom.range(), read and analyse traces.")
set(CPACK_DEBIAN_PYTHON_PACKAGE_SUGGESTS "python3-torch")

# Files whose own dependencies become Suggests rather than Depends: loaded
# only once their runtime is in the process (the PyTorch shim, once libtorch
# is), so the package installs and runs without it.
set(CPACK_LOOM_SUGGESTS_ONLY "loom-pytorch-shim.so")
set(CPACK_LOOM_LIBDIR ${CMAKE_INSTALL_LIBDIR})
set(CPACK_LOOM_PYTHON_ABI "${Python3_VERSION_MAJOR}.${Python3_VERSION_MINOR}")
set(CPACK_PRE_BUILD_SCRIPTS ${CMAKE_CURRENT_LIST_DIR}/debdeps.cmake)

# libloom.so.0 is a public library: its shlibs entry, so that packages built
# against it depend on loom, and the ldconfig trigger that makes programs
# linked with -lloom find it.  Python's byte code is compiled on install and
# removed before removal (as dh_python3 does), so nothing stays behind.
set(_deb ${PROJECT_BINARY_DIR}/deb)
file(WRITE ${_deb}/loom/shlibs "libloom 0 loom (>= ${PROJECT_VERSION})\n")
file(WRITE ${_deb}/loom/triggers "activate-noawait ldconfig\n")
file(WRITE ${_deb}/python/postinst "#!/bin/sh
set -e
if [ \"$1\" = configure ] && command -v py3compile >/dev/null 2>&1; then
  py3compile -p python3-loom
fi
")
file(WRITE ${_deb}/python/prerm "#!/bin/sh
set -e
if command -v py3clean >/dev/null 2>&1; then
  py3clean -p python3-loom
else
  dpkg -L python3-loom | sed -En -e '/^(.*)\\/(.+)\\.py$/s,,rm \"\\1/__pycache__/\\2\".*,e'
  find /usr/lib/python3/dist-packages/loom -type d -name __pycache__ -empty -delete
fi
")
file(CHMOD ${_deb}/python/postinst ${_deb}/python/prerm
     PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE
                 WORLD_READ WORLD_EXECUTE)
set(CPACK_DEBIAN_LOOM_PACKAGE_CONTROL_EXTRA "${_deb}/loom/shlibs;${_deb}/loom/triggers")
set(CPACK_DEBIAN_PYTHON_PACKAGE_CONTROL_EXTRA "${_deb}/python/postinst;${_deb}/python/prerm")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)
