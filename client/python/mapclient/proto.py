"""The message modules generated from MAP's proto/ at build time, for callers that build or read
protos themselves: ``jobs_pb2`` (JobSpec, Job, JobEvent, ...), ``graph_pb2`` (Graph),
``plan_pb2`` (Plan), ``planner_service_pb2`` (PlanRequest/Response, ProfileRequest/Response),
``workers_pb2`` (Worker)."""
from mapclient._stubs import graph_pb2, jobs_pb2, plan_pb2, planner_service_pb2, workers_pb2

__all__ = ["graph_pb2", "jobs_pb2", "plan_pb2", "planner_service_pb2", "workers_pb2"]
