"""Builds mapclient, generating its gRPC stubs from MAP's proto/ at build time.

The metadata is in pyproject.toml; this file only adds the build step: `build_py` runs protoc with
grpc_python_plugin over proto/mapd/v1/*.proto and proto/grpc/health/v1/health.proto and writes the
modules into the package as `mapclient._proto.mapd.v1.*_pb2[_grpc]` (with `.pyi` type stubs), their
imports rewritten from `mapd.v1` to `mapclient._proto.mapd.v1` so they live inside the package and
never shadow another `mapd` or `grpc` package.

Where things are found:
- the protos: $MAPCLIENT_PROTO_DIR, else ../../proto beside this file (the repository's proto/);
- protoc: $PROTOC, else `protoc` on PATH (Debian: protobuf-compiler);
- the plugin: $GRPC_PYTHON_PLUGIN, else /usr/bin/grpc_python_plugin, else on PATH
  (Debian: protobuf-compiler-grpc).
"""
import os
import re
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


class BuildError(RuntimeError):
    pass


def _find_protos():
    root = os.environ.get("MAPCLIENT_PROTO_DIR") or os.path.normpath(os.path.join(HERE, "..", "..", "proto"))
    mapd_dir = os.path.join(root, "mapd", "v1")
    if not os.path.isdir(mapd_dir):
        raise BuildError(
            f"mapclient: MAP's protos are not at {root} (looked for {mapd_dir}): build mapclient from MAP's source tree "
            "(client/python, whose ../../proto is the repository's proto/), or set MAPCLIENT_PROTO_DIR to that proto/ directory")
    protos = sorted(f"mapd/v1/{name}" for name in os.listdir(mapd_dir) if name.endswith(".proto"))
    if os.path.exists(os.path.join(root, "grpc", "health", "v1", "health.proto")):
        protos.append("grpc/health/v1/health.proto")
    return root, protos


def _find_tools():
    protoc = os.environ.get("PROTOC") or shutil.which("protoc")
    if not protoc or not os.access(protoc, os.X_OK):
        raise BuildError(
            "mapclient: protoc, the protocol buffer compiler, was not found (PATH, or $PROTOC): it generates mapclient's "
            "stubs at build time. On Debian: apt-get install protobuf-compiler protobuf-compiler-grpc")
    plugin = os.environ.get("GRPC_PYTHON_PLUGIN")
    if not plugin:
        plugin = "/usr/bin/grpc_python_plugin" if os.path.exists("/usr/bin/grpc_python_plugin") else shutil.which("grpc_python_plugin")
    if not plugin or not os.access(plugin, os.X_OK):
        raise BuildError(
            "mapclient: grpc_python_plugin, protoc's gRPC Python plugin, was not found (/usr/bin/grpc_python_plugin, PATH, "
            "or $GRPC_PYTHON_PLUGIN): it generates mapclient's service stubs at build time. On Debian: "
            "apt-get install protobuf-compiler-grpc")
    return protoc, plugin


# `from mapd.v1 import x_pb2 as ...`, `from grpc.health.v1 import ...` and the builder's module
# names ('mapd.v1.jobs_pb2'): all moved under mapclient._proto.
_IMPORT = re.compile(r"^(from|import) (mapd\.v1|grpc\.health\.v1)(\b)", re.MULTILINE)
_BUILDER = re.compile(r"(BuildTopDescriptorsAndMessages\(DESCRIPTOR, ')(mapd\.v1\.|grpc\.health\.v1\.)")


def generate_stubs(package_dir):
    """Writes the generated modules into `package_dir`/_proto (emptied first)."""
    root, protos = _find_protos()
    protoc, plugin = _find_tools()
    out = os.path.abspath(os.path.join(package_dir, "_proto"))
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    cmd = [protoc, f"-I{root}", f"--python_out={out}", f"--pyi_out={out}", f"--grpc_out={out}",
           f"--plugin=protoc-gen-grpc={plugin}", *protos]
    r = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    if r.returncode != 0:
        raise BuildError(f"mapclient: protoc failed ({' '.join(cmd)}):\n{r.stderr}")
    for dirpath, _, files in os.walk(out):
        open(os.path.join(dirpath, "__init__.py"), "a").close()
        for name in files:
            if not name.endswith((".py", ".pyi")):
                continue
            path = os.path.join(dirpath, name)
            with open(path) as f:
                text = f.read()
            text = _IMPORT.sub(r"\1 mapclient._proto.\2\3", text)
            text = _BUILDER.sub(r"\1mapclient._proto.\2", text)
            with open(path, "w") as f:
                f.write(text)
    with open(os.path.join(out, "__init__.py"), "w") as f:
        f.write('"""gRPC stubs generated at build time from MAP\'s proto/ (setup.py); not committed."""\n')


def record_source_tree(package_dir):
    """Writes `package_dir`/_source_tree.py naming the MAP source tree this build came from, where
    the package looks for the mapctl built beside it (mapclient._module.find_mapctl) when neither
    mapctl=, $MAPCTL nor PATH gives one."""
    tree = os.path.normpath(os.path.join(HERE, "..", ".."))
    with open(os.path.join(package_dir, "_source_tree.py"), "w") as f:
        f.write('"""The MAP source tree mapclient was built from (setup.py); not committed."""\n')
        f.write(f"SOURCE_TREE = {tree!r}\n")


class BuildPyWithStubs(build_py):
    """build_py that also generates the stubs and records the source tree: into the build
    directory, or into the source package for an editable install (`pip install -e`, gitignored
    there)."""

    def run(self):
        super().run()
        in_place = bool(getattr(self, "editable_mode", False))
        target = os.path.join(HERE, "mapclient") if in_place else os.path.join(self.build_lib, "mapclient")
        try:
            generate_stubs(target)
        except BuildError as e:
            raise SystemExit(str(e)) from None
        record_source_tree(target)


setup(packages=["mapclient"], package_data={"mapclient": ["py.typed"]}, cmdclass={"build_py": BuildPyWithStubs})
