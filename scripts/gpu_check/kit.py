#!/usr/bin/env python3
"""The dependency kit of the GPU check: what MAP's build needs besides LibTorch, the CUDA toolkit,
a C++ compiler, CMake and Ninja (which the GPU machine has), taken from this machine's Debian
packages so that it builds where nothing can be installed.

  kit.py make DIR.tar.xz        the -dev packages' files (headers, CMake and pkg-config files,
                                shared libraries, protoc and grpc_cpp_plugin) and every shared
                                library they load that a bare glibc system lacks, under usr/
  kit.py hide                   the directories and programs of those packages on this machine,
                                one a line: what the CPU rehearsal covers up to build from the kit

Static archives are left out where a shared library stands beside them (the kit must stay under
64 MiB to travel); documentation too.
"""
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

# What MAP's CMake finds (CMakeLists.txt, planner/solver, server, worker/transport), and what
# their CMake configurations find in turn (gRPC: OpenSSL, ZLIB, c-ares, re2).
PACKAGES = [
    "libprotobuf-dev", "protobuf-compiler", "libabsl-dev", "libgrpc++-dev", "libgrpc-dev", "protobuf-compiler-grpc",
    "nlohmann-json3-dev", "libcli11-dev", "libyaml-cpp-dev", "coinor-libcbc-dev", "coinor-libclp-dev",
    "coinor-libcoinutils-dev", "coinor-libosi-dev", "coinor-libcgl-dev", "libsqlite3-dev", "libcpp-httplib-dev",
    "prometheus-cpp-dev", "libgtest-dev", "libgmock-dev", "libgloo-dev", "libssl-dev", "zlib1g-dev", "libc-ares-dev",
    "libre2-dev", "pkgconf", "libpkgconf3",
]
# Libraries every glibc system with a C++ compiler has: never carried.
BASE = ("libc.so", "libm.so", "libpthread.so", "libdl.so", "librt.so", "ld-linux", "libstdc++.so", "libgcc_s.so",
        "linux-vdso", "libresolv.so", "libutil.so")
LINKED_BY_NAME = ("libblas.so.3", "liblapack.so.3")
SKIP_PARTS = ("/share/doc/", "/share/man/", "/share/lintian/", "/share/bug/", "/share/info/")


def package_files(pkg):
    out = subprocess.run(["dpkg", "-L", pkg], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"kit: package {pkg} is not installed; run scripts/install-deps.sh")
    return [f for f in out.stdout.split("\n") if f.startswith("/usr/") and not any(s in f for s in SKIP_PARTS)]


def copy_one(src, root):
    """Copies a file or symlink (and, for a link, what it points to) to root + src."""
    dst = root + src
    if os.path.lexists(dst) or os.path.isdir(src) and not os.path.islink(src):
        return
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    if os.path.islink(src):
        os.symlink(os.readlink(src), dst)
        target = os.path.normpath(os.path.join(os.path.dirname(src), os.readlink(src)))
        if target.startswith("/usr/"):
            copy_one(target, root)
        return
    shutil.copy2(src, dst)


def is_static_beside_shared(path):
    return path.endswith(".a") and os.path.lexists(path[:-2] + ".so")


def needed_libraries(path):
    out = subprocess.run(["ldd", path], capture_output=True, text=True)
    for line in out.stdout.splitlines():
        parts = line.split("=>")
        if len(parts) == 2 and parts[1].strip().startswith("/"):
            yield parts[0].strip(), parts[1].split("(")[0].strip()


def carry(root, soname, resolved):
    """Carries a system library under usr/lib/<arch> (where the kit's others are; /lib is /usr/lib
    on Debian): the file once, under its own name, the name it is loaded by and the name a link
    line asks for (-lblas: libblas.so) as links to it. Returns the new file, or None."""
    system = os.path.realpath(resolved)
    if not system.startswith(("/usr/", "/lib/")):
        return None
    lib = root + "/usr/lib/x86_64-linux-gnu/"
    os.makedirs(lib, exist_ok=True)
    made = None
    if not os.path.lexists(lib + os.path.basename(system)):
        shutil.copy2(system, lib + os.path.basename(system))
        made = lib + os.path.basename(system)
    for name, target in ((soname, os.path.basename(system)), (soname.split(".so")[0] + ".so", soname)):
        if name != target and not os.path.lexists(lib + name):
            os.symlink(target, lib + name)
    return made


def make(tarball):
    with tempfile.TemporaryDirectory() as tmp:
        root = os.path.join(tmp, "kit")
        for pkg in PACKAGES:
            for f in package_files(pkg):
                if os.path.isfile(f) and not is_static_beside_shared(f):
                    copy_one(f, root)
        # The shared libraries they load, closed over (a bare system lacks libcares, libre2, ...),
        # and the BLAS and LAPACK that CBC's pkg-config file links by name.
        pending = [os.path.join(d, f) for d, _, fs in os.walk(root) for f in fs if ".so" in f or "/bin/" in d]
        for soname in LINKED_BY_NAME:
            pending.append(carry(root, soname, os.path.join("/usr/lib/x86_64-linux-gnu", soname)))
        seen = set()
        while pending:
            path = pending.pop()
            if path is None or path in seen or not os.path.isfile(path) or os.path.islink(path):
                continue
            seen.add(path)
            for soname, resolved in needed_libraries(path):
                if not soname.startswith(BASE) and not resolved.startswith(("/work", root)):
                    pending.append(carry(root, soname, resolved))
        with tarfile.open(tarball, "w:xz", preset=6) as t:
            t.add(root, arcname="kit")
    print(f"kit: {len(PACKAGES)} packages and {len(seen)} shared objects checked: {tarball} "
          f"({os.path.getsize(tarball) / 2**20:.1f} MiB)")


def hide():
    """The paths the rehearsal mounts over: each package's own directories under include/ and
    the CMake and pkg-config directories, and its programs."""
    paths = set()
    for pkg in PACKAGES:
        for f in package_files(pkg):
            for top in ("/usr/include/", "/usr/lib/x86_64-linux-gnu/cmake/", "/usr/lib/cmake/", "/usr/share/cmake/"):
                if f.startswith(top) and len(f) > len(top):
                    first = top + f[len(top):].split("/")[0]
                    if os.path.isdir(first) and first != "/usr/include/x86_64-linux-gnu":
                        paths.add(first)
            if f.startswith("/usr/bin/") and os.path.isfile(f):
                paths.add(f)
            for pc in ("/usr/lib/x86_64-linux-gnu/pkgconfig", "/usr/share/pkgconfig"):
                if f.startswith(pc + "/"):
                    paths.add(pc)  # the rehearsal's pkg-config reads the kit's alone (PKG_CONFIG_LIBDIR)
            if f.startswith("/usr/include/") and f.count("/") == 3 and os.path.isfile(f):
                paths.add(f)  # a header right in /usr/include (sqlite3.h, httplib.h, zlib.h)
    print("\n".join(sorted(paths)))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "make":
        make(sys.argv[2])
    elif len(sys.argv) == 2 and sys.argv[1] == "hide":
        hide()
    else:
        raise SystemExit(__doc__)
