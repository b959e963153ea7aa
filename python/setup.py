"""Build step of the amped Python package: find libamped, or build it.

`pip install ./python` runs this. The package is pure Python over
libamped.so (ctypes); the build step decides which libamped it loads:

1. AMPED_LIB=/path/to/libamped.so: that library (recorded, not copied);
2. else an installed libamped that pkg-config knows (`amped.pc`): its
   libdir's libamped.so (recorded, not copied);
3. else (or with AMPED_FROM_SOURCE=1) the source tree one level up: where
   it is configured in place (./configure there), by its own make; else
   in a temporary folder: `../configure --disable-static` (after
   `autoreconf -fi` where ../configure is missing), `make lib/libamped.la`,
   and lib/.libs/libamped.so copied into the package (amped/_libs/).
   configure builds the CUDA backend when it finds nvcc, so on a machine
   with CUDA the package runs on GPUs; AMPED_CONFIGURE_FLAGS adds
   arguments (e.g. "--with-cuda=/usr/local/cuda" or "--without-cuda").

amped/_lib.py loads AMPED_LIB at run time first, then the recorded path,
then the bundled copy, then whatever ctypes.util.find_library finds.
"""
import glob
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py as _build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
SRCDIR = os.path.dirname(HERE)


def log(msg):
    print("amped setup: " + msg, file=sys.stderr, flush=True)


def _sh(cmd, cwd):
    log(f"({cwd}) {' '.join(shlex.quote(c) for c in cmd)}")
    subprocess.run(cmd, cwd=cwd, check=True)


def _library_in(libdir):
    for pat in ("libamped.so", "libamped.so.*", "libamped.dylib", "libamped.*.dylib"):
        found = sorted(glob.glob(os.path.join(libdir, pat)), key=len)
        if found:
            return found[0]
    return None


def installed_library():
    """AMPED_LIB, else the libamped pkg-config names; None for neither."""
    env = os.environ.get("AMPED_LIB")
    if env:
        if not os.path.isfile(env):
            raise SystemExit(f"amped setup: AMPED_LIB={env}: no such file")
        return os.path.abspath(env)
    if os.environ.get("AMPED_FROM_SOURCE"):
        return None
    try:
        libdir = subprocess.run(["pkg-config", "--variable=libdir", "amped"],
                                capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return _library_in(libdir) if libdir else None


def build_library(dest):
    """Build libamped from the source tree above; copy it into dest."""
    if not os.path.isfile(os.path.join(SRCDIR, "configure.ac")):
        raise SystemExit(
            "amped setup: no libamped found (set AMPED_LIB, or install libamped with "
            "amped.pc) and no amped source tree at " + SRCDIR + " to build one from")
    jobs = os.environ.get("AMPED_MAKE_JOBS") or str(os.cpu_count() or 2)
    in_tree = os.path.isfile(os.path.join(SRCDIR, "config.status"))
    if in_tree:
        # Configured in place (the README's quick start): configure cannot
        # build elsewhere from this tree, so its own build makes the library.
        build = SRCDIR
    else:
        if not os.path.isfile(os.path.join(SRCDIR, "configure")):
            _sh(["autoreconf", "-fi"], SRCDIR)
        build = tempfile.mkdtemp(prefix="amped-lib-")
    try:
        if not in_tree:
            flags = shlex.split(os.environ.get("AMPED_CONFIGURE_FLAGS", ""))
            _sh([os.path.join(SRCDIR, "configure"), "--disable-static"] + flags, build)
        _sh(["make", "-j" + jobs, "lib/libamped.la"], build)
        so = os.path.join(build, "lib", ".libs", "libamped.so")
        if not os.path.exists(so):
            raise SystemExit(f"amped setup: make lib/libamped.la made no {so}")
        real = os.path.realpath(so)
        os.makedirs(dest, exist_ok=True)
        # One file, the real one, under the soname's name (libamped.so.N):
        # loaded by its path, it needs no symlinks.
        soname = _soname(real) or os.path.basename(real)
        shutil.copy2(real, os.path.join(dest, soname))
        log(f"bundled {real} as {os.path.join(dest, soname)}")
        info = subprocess.run(["grep", "-E", "^#define AMP_HAVE_CUDA 1",
                               os.path.join(build, "config.h")],
                              capture_output=True, text=True).stdout.strip()
        log("CUDA backend: " + ("yes" if info else "no (no nvcc found, or --without-cuda)"))
    finally:
        if not in_tree:
            shutil.rmtree(build, ignore_errors=True)


def _soname(path):
    try:
        out = subprocess.run(["objdump", "-p", path], capture_output=True, text=True).stdout
    except OSError:
        return None
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "SONAME":
            return parts[1]
    return None


class build_py(_build_py):
    """build_py, then libamped found (its path recorded) or built (bundled)."""

    def run(self):
        super().run()
        pkg = os.path.join(self.build_lib, "amped")
        os.makedirs(pkg, exist_ok=True)
        found = installed_library()
        if found:
            log(f"using {found}")
            record = found
        else:
            build_library(os.path.join(pkg, "_libs"))
            record = None
        with open(os.path.join(pkg, "_build_config.py"), "w") as f:
            f.write('"""Written by setup.py: the libamped this install was built for."""\n')
            f.write(f"LIBRARY = {record!r}\n")


class BinaryDistribution(Distribution):
    """A wheel that may carry libamped.so is platform-specific."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": build_py}, distclass=BinaryDistribution)
