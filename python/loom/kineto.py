"""loom.kineto: importing it puts loom inside Kineto, the library under
torch.profiler, with no other code:

    import loom.kineto          # after `import torch` or before, either way
    with torch.profiler.profile(activities=[...]) as prof:
        ...                     # device work of every loom backend in prof's trace

It loads libloom-kineto.so (the Kineto bridge, bridges/kineto), whose
loading registers loom's child profiler with Kineto (loom_kineto_register,
<loom/kineto.h>).  The file is looked for in $LOOM_KINETO_LIB, the build
tree this package was built in, the lib folder of the prefix it is installed
in, then the loader's search path.  A bridge that cannot be loaded or
registered raises loom.Error with the reason.  See docs/kineto.md.
"""
import ctypes
import os

from . import Error, _loom  # noqa: F401 (libloom in the process first: the bridge finds it)

_HERE = os.path.dirname(os.path.abspath(__file__))


def _candidates():
    env = os.environ.get("LOOM_KINETO_LIB")
    if env:
        yield env
        return
    try:
        from ._kineto_where import PATH  # written by the build tree's CMake
        yield PATH
    except ImportError:
        pass
    # <prefix>/lib/python3.X/site-packages/loom -> <prefix>/lib
    yield os.path.normpath(os.path.join(_HERE, "..", "..", "..", "libloom-kineto.so"))
    yield "libloom-kineto.so"


def _load():
    errors = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            errors.append(path + ": no such file")
            continue
        try:
            return path, ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError as e:
            errors.append(str(e))
    raise Error("loom.kineto: the Kineto bridge (libloom-kineto.so, built with "
                "-DLOOM_KINETO_DIR) cannot be loaded: " + "; ".join(errors))


#: The bridge's file.
path, _lib = _load()
#: loom_kineto_register()'s result: 0 (registered), else a negative loom status.
status = _lib.loom_kineto_register()
if status != 0:
    raise Error(f"loom.kineto: loom_kineto_register() failed ({status}); see the message above")
