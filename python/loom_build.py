"""pip's build backend for loom's Python package (PEP 517; pyproject.toml names it): it
compiles the extension module (python/loom/*.c) against a libloom that is already built and
writes the wheel itself, so `pip install .` needs nothing from a package index (no build
requirements: it works with pip's build isolation on or off) and no setuptools.

Which libloom, in this order:
  1. LOOM_BUILD_DIR=DIR, or `pip install . --config-settings build-dir=DIR` (absolute, or
     relative to the source tree, where PEP 517 runs the backend): a CMake build tree of loom
     (DIR/libloom.so, the headers of the source tree DIR was configured from, plug-ins in
     DIR/plugins, the Kineto bridge DIR/libloom-kineto.so).
  2. `pkg-config loom` (PKG_CONFIG_PATH=P/lib/pkgconfig for a prefix of `cmake --install`):
     an installed libloom, its headers, plug-ins in LIBDIR/loom.
The extension's RUNPATH names that libloom's folder, and the package ships no copy of it:
`import loom` finds the plug-ins next to the libloom it runs on, so a copy would need a copy
of every plug-in, the preload and the bridge, and would drift from the libloom that the CLI,
`loom record` and a program's own C code use in the same process.  That libloom must stay
where it is (a build tree kept, or the installed loom); pip uninstall leaves it alone.
The package's files are every .py under python/loom (found, not listed), the extension, and
_kineto_where.py naming the Kineto bridge beside that libloom when there is one (loom.kineto).
The link is checked by loading the extension with every symbol bound (a source tree newer
than the libloom it names fails here, not at `import loom`).  See docs/python.md.
"""
import base64
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile

_TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PKG = os.path.join(_TOP, "python", "loom")


class BuildError(Exception):
    """What is missing, and how to provide it."""


# ---- metadata -----------------------------------------------------------------------------
def _project():
    """pyproject.toml's [project] table (tomllib; before Python 3.11, its plain strings)."""
    path = os.path.join(_TOP, "pyproject.toml")
    try:
        import tomllib
        with open(path, "rb") as f:
            return tomllib.load(f).get("project", {})
    except ImportError:
        with open(path) as f:
            text = f.read()
        table = re.search(r"^\[project\]\n(.*?)(?=^\[|\Z)", text, re.M | re.S)
        return dict(re.findall(r'^([\w-]+)\s*=\s*"([^"]*)"', table.group(1) if table else "",
                               re.M))


def _version():
    """The project's version, from the top CMakeLists.txt (one place for every artefact)."""
    with open(os.path.join(_TOP, "CMakeLists.txt")) as f:
        m = re.search(r"project\(\s*loom\s+VERSION\s+([0-9.]+)", f.read())
    if not m:
        raise BuildError("no `project(loom VERSION x.y.z` in CMakeLists.txt")
    return m.group(1)


def _metadata(project, version):
    lines = ["Metadata-Version: 2.1", "Name: " + project.get("name", "loom"),
             "Version: " + version]
    if project.get("description"):
        lines.append("Summary: " + project["description"])
    if project.get("requires-python"):
        lines.append("Requires-Python: " + project["requires-python"])
    return "\n".join(lines) + "\n"


def _tag():
    impl = "cp" if sys.implementation.name == "cpython" else sys.implementation.name[:2]
    py = "%s%d%d" % (impl, sys.version_info[0], sys.version_info[1])
    abi = py + getattr(sys, "abiflags", "")
    plat = re.sub(r"[-.]", "_", sysconfig.get_platform())
    return py, abi, plat


# ---- which libloom ------------------------------------------------------------------------
def _cmake_cache(build, key):
    try:
        with open(os.path.join(build, "CMakeCache.txt")) as f:
            m = re.search(r"^%s:[A-Z]+=(.*)$" % re.escape(key), f.read(), re.M)
    except OSError:
        return None
    return m.group(1) if m else None


def _from_build_tree(build):
    build = os.path.abspath(build)
    lib = os.path.join(build, "libloom.so")
    if not os.path.exists(lib):
        raise BuildError("LOOM_BUILD_DIR=%s holds no libloom.so: build it first "
                         "(cmake -S . -B %s && cmake --build %s)" % (build, build, build))
    src = _cmake_cache(build, "CMAKE_HOME_DIRECTORY") or _TOP
    kineto = os.path.join(build, "libloom-kineto.so")
    return {"from": "the build tree " + build, "libdir": build,
            "cflags": ["-I" + os.path.join(src, "include")],
            "kineto": kineto if os.path.exists(kineto) else None}


def _pkg_config(*args):
    try:
        r = subprocess.run(["pkg-config"] + list(args) + ["loom"], capture_output=True,
                           text=True)
    except OSError:
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def _from_pkg_config():
    libdir = _pkg_config("--variable=libdir")
    if libdir is None:
        return None
    libdir = os.path.realpath(libdir)
    if not os.path.exists(os.path.join(libdir, "libloom.so")):
        raise BuildError("pkg-config's loom names %s, which holds no libloom.so" % libdir)
    kineto = os.path.join(libdir, "libloom-kineto.so")
    return {"from": "pkg-config (%s)" % libdir, "libdir": libdir,
            "cflags": shlex.split(_pkg_config("--cflags") or ""),
            "kineto": kineto if os.path.exists(kineto) else None}


def _libloom(config_settings):
    build = (config_settings or {}).get("build-dir") or os.environ.get("LOOM_BUILD_DIR")
    found = _from_build_tree(build) if build else _from_pkg_config()
    if not found:
        raise BuildError(
            "no libloom to build loom's Python package against: pkg-config finds no `loom` "
            "(install loom, or set PKG_CONFIG_PATH=PREFIX/lib/pkgconfig after `cmake --install "
            "BUILD --prefix PREFIX`), and LOOM_BUILD_DIR names no build tree (LOOM_BUILD_DIR="
            "build after `cmake -S . -B build && cmake --build build`)")
    return found


# ---- the extension --------------------------------------------------------------------------
def _compile(lib, out):
    """Compiles and links python/loom/*.c into OUT, RUNPATH = lib's folder."""
    cc = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    cflags = shlex.split((sysconfig.get_config_var("CFLAGS") or "") + " "
                         + os.environ.get("CFLAGS", ""))
    sources = sorted(os.path.join(_PKG, n) for n in os.listdir(_PKG) if n.endswith(".c"))
    paths = sysconfig.get_paths()
    cmd = (cc + cflags + shlex.split(sysconfig.get_config_var("CCSHARED") or "-fPIC")
           + ["-std=gnu11", "-fvisibility=hidden", "-shared",
              "-I" + paths["include"], "-I" + paths["platinclude"]] + lib["cflags"] + sources
           + shlex.split(os.environ.get("LDFLAGS", ""))
           + ["-L" + lib["libdir"], "-Wl,--enable-new-dtags,-rpath," + lib["libdir"],
              "-lloom", "-ldl", "-o", out])
    print("loom: building the extension against libloom from %s" % lib["from"], flush=True)
    print(" ".join(shlex.quote(c) for c in cmd), flush=True)
    r = subprocess.run(cmd)
    if r.returncode != 0:
        raise BuildError("compiling the extension failed (above)")
    probe = "import ctypes, os, sys; ctypes.CDLL(sys.argv[1], os.RTLD_NOW)"
    r = subprocess.run([sys.executable, "-c", probe, out], capture_output=True, text=True,
                       env=dict(os.environ, LD_LIBRARY_PATH=""))
    if r.returncode != 0:
        hint = ("\n(a libloom older than this source tree: build this tree's)"
                if "undefined symbol" in r.stderr else "")
        raise BuildError("the extension does not load with libloom from %s:\n%s%s"
                         % (lib["from"], (r.stderr.strip().splitlines() or ["?"])[-1], hint))


def _package_files(lib, staging):
    """(path in the wheel, file here) for every file the package holds."""
    files = []
    for d, dirs, names in os.walk(_PKG):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        for n in sorted(names):
            if n.endswith(".py") and n != "_kineto_where.py":
                rel = os.path.relpath(os.path.join(d, n), os.path.dirname(_PKG))
                files.append((rel.replace(os.sep, "/"), os.path.join(d, n)))
    ext = "_loom" + sysconfig.get_config_var("EXT_SUFFIX")
    _compile(lib, os.path.join(staging, ext))
    files.append(("loom/" + ext, os.path.join(staging, ext)))
    if lib["kineto"]:
        where = os.path.join(staging, "_kineto_where.py")
        with open(where, "w") as f:
            f.write('"""The Kineto bridge beside the libloom this package uses."""\n'
                    "PATH = %r\n" % lib["kineto"])
        files.append(("loom/_kineto_where.py", where))
    return files


# ---- the wheel --------------------------------------------------------------------------------
def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def _write_wheel(path, files, dist_info, meta):
    record = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        def add(name, data, mode=0o644):
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
            record.append(_record_line(name, data))
        for name, src in files:
            with open(src, "rb") as f:
                add(name, f.read(), 0o755 if name.endswith(".so") else 0o644)
        for name, text in meta:
            add(dist_info + "/" + name, text.encode())
        record.append(dist_info + "/RECORD,,")
        add_record = zipfile.ZipInfo(dist_info + "/RECORD", date_time=(1980, 1, 1, 0, 0, 0))
        add_record.external_attr = 0o100644 << 16
        z.writestr(add_record, "\n".join(record) + "\n", zipfile.ZIP_DEFLATED)


# ---- the PEP 517 hooks ----------------------------------------------------------------------
def get_requires_for_build_wheel(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    project, version = _project(), _version()
    name = project.get("name", "loom")
    py, abi, plat = _tag()
    dist_info = "%s-%s.dist-info" % (name, version)
    wheel = "%s-%s-%s-%s-%s.whl" % (name, version, py, abi, plat)
    staging = tempfile.mkdtemp(prefix="loom-wheel-")
    try:
        files = _package_files(_libloom(config_settings), staging)
        meta = [("METADATA", _metadata(project, version)),
                ("WHEEL", "Wheel-Version: 1.0\nGenerator: loom_build\nRoot-Is-Purelib: false\n"
                          "Tag: %s-%s-%s\n" % (py, abi, plat)),
                ("top_level.txt", "loom\n")]
        _write_wheel(os.path.join(wheel_directory, wheel), files, dist_info, meta)
    except BuildError as e:
        sys.stderr.write("loom: %s\n" % e)
        raise SystemExit(1)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return wheel
