"""Run by install.sh: the package imported from an installed prefix."""
import os

import pytest

import loom

PREFIX = os.environ.get("LOOM_PY_INSTALLED")


@pytest.mark.skipif(not PREFIX, reason="only after cmake --install (tests/python/install.sh)")
def test_installed_package_uses_the_installed_library():
    real = os.path.realpath(PREFIX)
    assert os.path.realpath(loom.__file__).startswith(real)
    assert os.path.realpath(loom._loom.library).startswith(real)
    assert os.path.realpath(loom._loom.plugin_dir) == os.path.join(real, "lib", "loom")
    with loom.profile() as p:
        with loom.range("installed"):
            pass
    assert [e.name for e in p.trace.events()] == ["installed"]
