"""Where the loft Python package loads libloft from: $LOFT_LIBRARY, else its
own prefix (loft/_libpath.py), nothing else. The package used to load the
first libloft.so* found in an ancestor directory's lib/ or capi/ (up to six
levels up), so a library planted in a directory above the package was
loaded. Each case runs a clean `python3 -c 'import loft'` (env -i):
 1. a package without _libpath.py (the source tree's, copied below a
    planted libloft) refuses to load anything, naming LOFT_LIBRARY;
 2. LOFT_LIBRARY=<the built library> loads exactly it; a LOFT_LIBRARY that
    is not a file is an error naming it;
 3. an installed package (cmake --install) loads its prefix's libloft,
    not one planted in lib/python3/lib nearer to it;
 4. the build tree's package loads the build's libloft.
argv: BUILD SRC TMPDIR."""
import glob
import os
import shutil
import subprocess
import sys

build, src, tmp = sys.argv[1:4]
shutil.rmtree(tmp, ignore_errors=True)
os.makedirs(tmp)
# The library the build links (libloft.so -> .so.MAJOR -> .so.X.Y.Z), not
# whichever versioned file a glob finds first (an older version's stays in
# a build tree after the version changes).
real = os.path.realpath(os.path.join(build, "lib", "libloft.so"))


def load(pythonpath, library=None):
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": pythonpath, "PYTHONDONTWRITEBYTECODE": "1"}
    if library is not None:
        env["LOFT_LIBRARY"] = library
    r = subprocess.run([sys.executable, "-c", "import loft; print(loft.library())"], capture_output=True, text=True,
                       env=env, timeout=60, cwd=tmp)
    return r.returncode, r.stdout.strip(), r.stderr


def plant(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    shutil.copy(real, path)  # a working library: loading it would go unnoticed


# 1. The source package below a planted library.
site = os.path.join(tmp, "a", "b", "site")
shutil.copytree(os.path.join(src, "python", "loft"), os.path.join(site, "loft"))
assert not os.path.exists(os.path.join(site, "loft", "_libpath.py"))
decoy = os.path.join(tmp, "a", "lib", "libloft.so.0")
plant(decoy)
rc, out, err = load(site)
assert rc != 0, f"loaded {out} (planted above the package)"
assert "LOFT_LIBRARY" in err and "does not come with libloft" in err, err
print("source package, no LOFT_LIBRARY: refused:", err.strip().splitlines()[-1])

# 2. LOFT_LIBRARY.
rc, out, err = load(site, real)
assert rc == 0 and out == real, (rc, out, err)
rc, out, err = load(site, os.path.join(tmp, "nowhere", "libloft.so"))
assert rc != 0 and "is not a file" in err and "nowhere" in err, (rc, out, err)
print("LOFT_LIBRARY: loads", out or real, "; a missing path is refused")

# 3. An install prefix, with a library planted nearer to the package.
prefix = os.path.join(tmp, "prefix")
subprocess.run(["cmake", "--install", build, "--prefix", prefix], check=True, capture_output=True, timeout=300)
pkgs = glob.glob(os.path.join(prefix, "**", "loft", "_libpath.py"), recursive=True)
assert len(pkgs) == 1, pkgs
installed_site = os.path.dirname(os.path.dirname(pkgs[0]))
plant(os.path.join(os.path.dirname(installed_site), "lib", "libloft.so.0"))  # e.g. prefix/lib/python3/lib
rc, out, err = load(installed_site)
assert rc == 0, err
assert os.path.realpath(out).startswith(prefix + os.sep) and os.path.realpath(out) != os.path.realpath(
    os.path.join(os.path.dirname(installed_site), "lib", "libloft.so.0")), out
assert os.path.dirname(out) == os.path.normpath(os.path.join(prefix, "lib")), out
print("installed package: loads", out)

# 4. The build tree's package.
rc, out, err = load(os.path.join(build, "python"))
assert rc == 0 and os.path.realpath(out) == real, (rc, out, err)
print("build tree package: loads", out)
print("ok")
