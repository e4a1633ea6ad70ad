"""mapclient: the Python client of MAP's coordinator ``mapd`` (docs/python.md).

    import mapclient, torch
    with mapclient.Client("127.0.0.1:7070", token="secret") as c:
        job = c.submit(module=model, example_inputs=(x, y), steps=5, ranks=2)
        assert c.wait(job).state == "SUCCEEDED"

:class:`Client` speaks the job service (submit, get, list, cancel, events, logs, watch, wait,
follow) and the planner service (plan, profile) with the bearer token; failures are
:class:`MapError` s carrying the gRPC status code's name. Jobs and events come back as
:class:`Job` and :class:`Event` (their protos in ``.proto``); :mod:`mapclient.proto` has the
generated message modules (``jobs_pb2``, ``graph_pb2``, ``plan_pb2``, ...).
"""
from mapclient._errors import MapError
from mapclient._types import Evaluation, Event, Job, JobState
from mapclient._client import DEFAULT_ADDRESS, Client, parse_bytes
from mapclient._module import find_mapctl, module_to_graph

__version__ = "0.1.0"

__all__ = ["Client", "Job", "Event", "Evaluation", "JobState", "MapError", "module_to_graph", "find_mapctl", "parse_bytes",
           "DEFAULT_ADDRESS", "__version__"]
