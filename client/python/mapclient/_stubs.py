"""The gRPC stubs generated at build time (setup.py) into mapclient._proto."""
try:
    from mapclient._proto.mapd.v1 import (graph_pb2, job_service_pb2_grpc, jobs_pb2, plan_pb2, planner_service_pb2,
                                          planner_service_pb2_grpc, workers_pb2, workers_pb2_grpc)
except ImportError as e:  # pragma: no cover - a source checkout imported without being built
    raise ImportError(
        "mapclient's gRPC stubs are missing (mapclient._proto): they are generated from MAP's proto/ when the package is "
        "built — install it with `pip install --no-index --no-build-isolation client/python` (docs/python.md), which "
        f"needs protoc and grpc_python_plugin (Debian: protobuf-compiler protobuf-compiler-grpc) ({e})") from e

try:
    from mapclient._proto.grpc.health.v1 import health_pb2, health_pb2_grpc
except ImportError:  # pragma: no cover - built from a proto/ without the health service
    health_pb2 = health_pb2_grpc = None

__all__ = ["graph_pb2", "jobs_pb2", "job_service_pb2_grpc", "plan_pb2", "planner_service_pb2", "planner_service_pb2_grpc",
           "workers_pb2", "workers_pb2_grpc", "health_pb2", "health_pb2_grpc"]
