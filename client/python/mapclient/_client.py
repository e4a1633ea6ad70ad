"""Client: MAP's coordinator (`mapd`) over gRPC — the job service and the planner service."""
from __future__ import annotations

import builtins
import logging
import os
import re
import sys
import time
from typing import Any, Dict, Iterator, List, Optional, Sequence, TextIO, Union

import grpc

from mapclient import _stubs
from mapclient._errors import MapError
from mapclient._types import Event, Job

log = logging.getLogger("mapclient")

DEFAULT_ADDRESS = "127.0.0.1:7070"  # mapctl's and mapd's default
JobRef = Union[int, Job]

# A watch that fails with one of these is opened again from the last event's seq: the coordinator
# restarting (UNAVAILABLE; CANCELLED from one shutting down with the stream open), busy
# (RESOURCE_EXHAUSTED: its watch streams all taken), or a call aborted.
_TRANSIENT = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED, grpc.StatusCode.RESOURCE_EXHAUSTED,
              grpc.StatusCode.ABORTED)

_CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", 256 << 20),  # Get answers a submitted graph whole, weights included
    ("grpc.max_send_message_length", 256 << 20),     # mapd --max-message-bytes' default
    ("grpc.initial_reconnect_backoff_ms", 200),      # find a restarted coordinator within a couple of seconds
    ("grpc.min_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 2000),
]


def _job_fields() -> List[str]:
    """JobSpec's fields and, flat beside them, its ``training`` message's (steps, lr, weight_decay, ...)."""
    spec = [f.name for f in _stubs.jobs_pb2.JobSpec.DESCRIPTOR.fields if f.name not in ("model", "graph")]
    return spec + _training_fields()


def _training_fields() -> List[str]:
    return [f.name for f in _stubs.jobs_pb2.JobSpec.DESCRIPTOR.fields_by_name["training"].message_type.fields]


def parse_bytes(text: Union[int, str]) -> int:
    """A memory size as MAP reads one (common/bytes.h): bytes, or a number with a unit — ``GiB``,
    ``MiB``, ``KiB``, ``TiB`` are powers of 1024, ``GB``, ``MB``, ``KB``, ``TB`` of 1000, any case."""
    if isinstance(text, bool):
        raise TypeError("memory_per_device: give bytes (an int) or a size such as '64MiB'")
    if isinstance(text, int):
        return text
    if not isinstance(text, str):
        raise TypeError(f"memory_per_device: give bytes (an int) or a size such as '64MiB', not a {type(text).__name__}")
    t = text.strip()
    factor = 1.0
    for suffix, f in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10), ("TB", 1e12), ("GB", 1e9),
                      ("MB", 1e6), ("KB", 1e3), ("B", 1)):
        if t.lower().endswith(suffix.lower()):
            factor, t = f, t[:-len(suffix)]
            break
    try:
        v = float(t.strip())
    except ValueError:
        v = -1.0
    if not (v > 0) or v * factor >= 2.0 ** 63 or v * factor < 1:
        raise ValueError(f"bad memory size {text!r}: use a positive number with a unit, e.g. 80GiB, 40GB or 512MiB")
    return int(v * factor)


def _job_id(job: JobRef) -> int:
    if isinstance(job, Job):
        return job.id
    if isinstance(job, int) and not isinstance(job, bool):
        return job
    if isinstance(job, str) and job.isdigit():
        return int(job)
    raise TypeError(f"give a job id or a Job, not {job!r}")


class Client:
    """A connection to the coordinator ``mapd``: submit, inspect, watch and cancel jobs, and plan models.

    Use it as a context manager (the channel is closed on exit) or call :meth:`close`::

        with mapclient.Client("127.0.0.1:7070", token="secret") as c:
            job = c.submit("gpt2:layers=2,hidden=64", steps=100, ranks=2)
            print(c.wait(job).state)

    Args:
        address: ``host:port`` of mapd; default ``$MAPD_ADDRESS``, else ``127.0.0.1:7070``
            (as ``mapctl``).
        token: the clients' bearer token (``mapd --token-file`` / ``$MAPD_TOKEN`` on the
            coordinator); default: the first line of ``token_file``, else ``$MAPD_TOKEN``. Every
            call carries it as ``authorization: Bearer <token>`` metadata.
        token_file: a file whose first line is the token (used when ``token`` is not given).
        tls_ca: a PEM file of root certificates: speak TLS and check the coordinator's
            certificate with them (``mapctl --tls-ca``); default plaintext. The certificate must
            name the host in ``address``.
        timeout: seconds each unary call may take (a Submit or Plan includes the planner's
            search); a watch has none unless given.
        mapctl: the mapctl binary that converts modules (``submit(module=...)``); default
            ``$MAPCTL``, else ``mapctl`` on PATH.
        busy_retry_seconds: how long a call the coordinator refuses as busy
            (RESOURCE_EXHAUSTED: its threads or plan searches all taken) is tried again, after
            0.2 s doubling to 5 s, as ``mapctl`` does; 0: not at all.

    Raises:
        MapError: FAILED_PRECONDITION when there is no token, NOT_FOUND when a file cannot be read.
    """

    def __init__(self, address: Optional[str] = None, token: Optional[str] = None, *, token_file: Optional[str] = None,
                 tls_ca: Optional[str] = None, timeout: float = 60.0, mapctl: Optional[str] = None,
                 busy_retry_seconds: float = 60.0) -> None:
        self.address: str = address or os.environ.get("MAPD_ADDRESS") or DEFAULT_ADDRESS
        if token is None and token_file is not None:
            try:
                with open(token_file) as f:
                    token = f.readline()
            except OSError as e:
                raise MapError("NOT_FOUND", f"cannot read the token file {token_file}: {e.strerror}", "token_file") from None
        if token is None:
            token = os.environ.get("MAPD_TOKEN", "")
        token = token.strip()
        if not token:
            raise MapError("FAILED_PRECONDITION", "no token: give token= or token_file=, or set MAPD_TOKEN (the coordinator's)",
                           "connect")
        self._metadata = (("authorization", f"Bearer {token}"),)
        self._credentials: Optional[grpc.ChannelCredentials] = None
        if tls_ca is not None:
            try:
                with open(tls_ca, "rb") as f:
                    self._credentials = grpc.ssl_channel_credentials(root_certificates=f.read())
            except OSError as e:
                raise MapError("NOT_FOUND", f"tls_ca {tls_ca}: cannot read it ({e.strerror})", "connect") from None
        self.timeout = timeout
        self.mapctl = mapctl
        self.busy_retry_seconds = busy_retry_seconds
        self._channel = self._open_channel()
        self._jobs = _stubs.job_service_pb2_grpc.JobServiceStub(self._channel)
        self._planner = _stubs.planner_service_pb2_grpc.PlannerServiceStub(self._channel)
        self._workers = _stubs.workers_pb2_grpc.WorkerServiceStub(self._channel)

    # --- connection ---------------------------------------------------------------------------

    def _open_channel(self) -> grpc.Channel:
        if self._credentials is not None:
            return grpc.secure_channel(self.address, self._credentials, options=_CHANNEL_OPTIONS)
        return grpc.insecure_channel(self.address, options=_CHANNEL_OPTIONS)

    def close(self) -> None:
        """Closes the channel; calls after this fail."""
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"mapclient.Client({self.address!r}{', tls' if self._credentials else ''})"

    def _call(self, what: str, method: Any, request: Any, timeout: Optional[float] = None) -> Any:
        wait, waited = 0.2, 0.0
        while True:
            try:
                return method(request, metadata=self._metadata, timeout=timeout if timeout is not None else self.timeout)
            except grpc.RpcError as e:
                if e.code() != grpc.StatusCode.RESOURCE_EXHAUSTED or waited >= self.busy_retry_seconds:
                    raise MapError.from_rpc(e, what, self.address) from None
                log.warning("mapclient %s: the coordinator is busy (%s); trying again in %.1f s", what, e.details(), wait)
                time.sleep(wait)
                waited += wait
                wait = min(wait * 2, 5.0)

    # --- jobs ---------------------------------------------------------------------------------

    def _spec(self, what: str, model: Optional[str], module: Any, example_inputs: Any, graph: Any, mapctl: Optional[str],
              fields: Dict[str, Any], defaults: Dict[str, Any], input_ranges: Optional[dict] = None) -> Any:
        valid = _job_fields()
        for key in fields:
            if key not in valid:
                raise TypeError(f"{what}() got an unexpected keyword argument {key!r}; the job fields are: {', '.join(valid)}")
        given = [n for n, v in (("model", model), ("module", module), ("graph", graph)) if v is not None]
        if len(given) != 1:
            raise TypeError(f"{what}(): give exactly one of model= (a zoo spec), module= (a torch.nn.Module) or graph= "
                            f"(a mapd.v1.Graph){'; got ' + ' and '.join(given) if given else ''}")
        if (example_inputs is not None or input_ranges is not None) and module is None:
            raise TypeError(f"{what}(): example_inputs and input_ranges go with module=")
        spec = _stubs.jobs_pb2.JobSpec()
        for key, value in {**defaults, **fields}.items():  # checked before a module is traced
            if value is None:
                continue
            try:
                _set_field(spec, key, value)
            except (TypeError, ValueError) as e:
                raise type(e)(f"{what}(): {key}={value!r}: {e}") from None
        if model is not None:
            if not isinstance(model, str):
                raise TypeError(f"model: a zoo spec such as 'gpt2:layers=2', not a {type(model).__name__} (a torch.nn.Module "
                                "is module=)")
            spec.model = model
        elif module is not None:
            from mapclient._module import module_to_graph
            spec.graph.CopyFrom(module_to_graph(module, example_inputs, mapctl=mapctl or self.mapctl,
                                                input_ranges=input_ranges))
        else:
            if not isinstance(graph, _stubs.graph_pb2.Graph):
                raise TypeError(f"graph: a mapd.v1.Graph (mapclient.proto.graph_pb2.Graph), not a {type(graph).__name__}")
            spec.graph.CopyFrom(graph)
        return spec

    def submit(self, model: Optional[str] = None, *, module: Any = None, example_inputs: Any = None, graph: Any = None,
               mapctl: Optional[str] = None, input_ranges: Optional[dict] = None, **fields: Any) -> Job:
        """Submits a training job; returns it as admitted (PENDING, with its plan's summary).

        Give the model one way:

        - ``model="gpt2:layers=2,hidden=64"``: a zoo spec (``mapctl models``), sent as text;
        - ``module=net, example_inputs=(x, y)``: a ``torch.nn.Module`` whose ``forward`` returns the
          training loss, traced and converted with ``mapctl import`` (see
          :func:`mapclient.module_to_graph`), its weights sent inside the graph; an integer input
          whose values MAP cannot bound from the graph takes ``input_ranges={"t": (0, 999)}``;
        - ``graph=g``: a ``mapd.v1.Graph`` whose output 0 is the loss, its parameters initialised
          by rule or carrying their data.

        Keyword fields are ``mapd.v1.JobSpec``'s (``mapctl submit -f job.yaml``'s): ``name``,
        ``steps`` (default 100), ``ranks`` (default 1), ``mesh`` (``"2x2"`` or ``(2, 2)``),
        ``device`` (cpu | cuda), ``device_type``, ``memory_per_device`` (bytes or ``"64MiB"``),
        ``optimizer`` (sgd | momentum | adamw), ``lr``, ``lr_schedule``, ``warmup_steps``,
        ``min_lr``, ``weight_decay``, ``max_grad_norm`` (clip the global gradient norm), ``data`` (synthetic | text:FILE | tokens:FILE | npy:INPUTS[,TARGETS], paths
        under the workers' ``--data-root``), ``eval_data``, ``eval_every``, ``eval_batches``,
        ``zero`` (auto | 0-3), ``recompute``, ``micro_batches``, ``precision``,
        ``pipeline_stages``, ``pin`` (``"tp=2,pp=2"``: parts of the configuration fixed, the rest
        planned, as ``mapctl plan --pin``), ``checkpoint_every``, ``seed`` — the training fields
        (``mapd.v1.TrainingConfig``'s, sent as ``spec.training``; ``training={...}`` works too) —,
        ``elastic`` (``"2:4"``, ``(2, 4)`` or
        ``{"min_devices": 2, "max_devices": 4}``: after a lost worker the job goes on with the
        devices left and grows back at its checkpoints). Fields left out get the coordinator's
        defaults.

        Raises:
            TypeError: an unknown keyword (naming it and the valid ones), a model given twice or
                not at all, a value of the wrong type.
            ValueError: a bad memory size or mesh; a module that returns no loss.
            MapError: the coordinator refusing the job — INVALID_ARGUMENT naming the field,
                FAILED_PRECONDITION when no plan fits the budget — or ``mapctl import`` refusing
                the module.
        """
        spec = self._spec("submit", model, module, example_inputs, graph, mapctl, fields, {"steps": 100, "ranks": 1},
                          input_ranges)
        return Job.from_proto(self._call("submit", self._jobs.Submit, _stubs.jobs_pb2.SubmitJobRequest(spec=spec)))

    def get(self, job: JobRef) -> Job:
        """The job, whole (its submitted graph included). NOT_FOUND for an unknown id."""
        jid = _job_id(job)
        return Job.from_proto(self._call(f"get {jid}", self._jobs.Get, _stubs.jobs_pb2.GetJobRequest(id=jid)))

    def list(self) -> List[Job]:
        """Every job, by id (all pages of ``List``); each ``spec.graph`` keeps only its name."""
        out: List[Job] = []
        req = _stubs.jobs_pb2.ListJobsRequest(page_size=1000)
        while True:
            page = self._call("list", self._jobs.List, req)
            out.extend(Job.from_proto(j) for j in page.jobs)
            if not page.next_page_token:
                return out
            req.page_token = page.next_page_token

    def cancel(self, job: JobRef) -> Job:
        """Cancels the job (CANCELLED); FAILED_PRECONDITION for a job that has finished."""
        jid = _job_id(job)
        return Job.from_proto(self._call(f"cancel {jid}", self._jobs.Cancel, _stubs.jobs_pb2.CancelJobRequest(id=jid)))

    def events(self, job: JobRef) -> builtins.list:
        """Everything that happened to the job so far, as :class:`Event` s in order (the
        coordinator keeps about 1,000 of a job's progress events)."""
        jid = _job_id(job)
        got = self._call(f"events {jid}", self._jobs.Events, _stubs.jobs_pb2.JobEventsRequest(id=jid))
        return [Event.from_proto(e) for e in got.events]

    def logs(self, job: JobRef, *, rank: Optional[int] = None, tail: int = 0, follow: bool = False,
             poll_seconds: float = 0.5) -> Union[builtins.list, Iterator[str]]:
        """The job's log.

        Without ``rank``: the messages of its events (as ``mapctl logs`` prints them, without the
        times): "submitted: ...", "running on w-1 (rank 0-1) ...", "step 3", ...

        With ``rank``: what that rank wrote (its stderr, as its worker captured it; the coordinator
        keeps the last part of each rank's output — ``mapctl logs ID --rank R``), as a list of
        lines; ``tail`` > 0: only the last lines. With ``follow=True`` a generator of lines instead,
        each as it comes, that ends when the job finishes (``mapctl logs ID --rank R -f``).
        """
        jid = _job_id(job)
        if rank is None:
            if follow:
                raise TypeError("follow needs a rank; watch() follows the events")
            messages = [e.message for e in self.events(job)]
            return messages[-tail:] if tail > 0 else messages
        lines = self._rank_output(jid, rank, tail, follow, poll_seconds)
        return lines if follow else builtins.list(lines)

    def _rank_output(self, jid: int, rank: int, tail: int, follow: bool, poll_seconds: float) -> Iterator[str]:
        req = _stubs.jobs_pb2.JobLogsRequest(id=jid, rank=rank, tail_lines=tail)
        partial = ""
        while True:
            got = self._call(f"logs {jid} --rank {rank}", self._jobs.Logs, req)
            *whole, partial = (partial + got.text.decode("utf-8", errors="replace")).split("\n")
            yield from whole
            # The coordinator reads whether the job has finished before its output: a finished
            # answer has everything.
            if not follow or got.finished:
                if partial:
                    yield partial
                return
            req.after_offset, req.tail_lines = got.next_offset, 0
            time.sleep(poll_seconds)

    def delete(self, job: JobRef) -> None:
        """Forgets a finished job with its events and output; FAILED_PRECONDITION while it runs
        (cancel it first)."""
        jid = _job_id(job)
        self._call(f"delete {jid}", self._jobs.Delete, _stubs.jobs_pb2.DeleteJobRequest(id=jid))

    def watch(self, job: JobRef, *, after_seq: int = 0, timeout: Optional[float] = None,
              reconnect_seconds: float = 60.0) -> Iterator[Event]:
        """Yields the job's events after ``after_seq`` (0: from the first), then each new one as it
        happens, and stops after the event that finishes the job (SUCCEEDED, FAILED, CANCELLED).

        A watch survives the coordinator restarting (its jobs and events are in its store): when
        the stream breaks — UNAVAILABLE, CANCELLED by a coordinator shutting down, RESOURCE_EXHAUSTED
        when its watch streams are all taken, ABORTED — it is opened again on a fresh channel with
        ``after_seq`` = the last event's seq, so no event is yielded twice or skipped. It waits
        0.2 s before the first try, doubling to 5 s, and gives up (MapError with the last code)
        when the coordinator is not back within ``reconnect_seconds`` of the outage's start (or
        keeps refusing the stream that long). Each outage has the whole budget: a watch that got
        back in survives the next restart too. Any other error ends it as a MapError.

        Args:
            job: a job id or a Job.
            after_seq: yield only events with a larger seq.
            timeout: seconds the whole watch may take (DEADLINE_EXCEEDED after); default none.
            reconnect_seconds: how long to keep trying to reconnect (0: never).
        """
        jid = _job_id(job)
        what = f"watch {jid}"
        last = after_seq
        deadline = None if timeout is None else time.monotonic() + timeout
        failing_since: Optional[float] = None
        backoff = 0.2
        channel: Optional[grpc.Channel] = None  # a fresh one per reconnection
        stub = self._jobs
        call = None
        try:
            while True:
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                failure: Optional[MapError] = None
                call = stub.Watch(_stubs.jobs_pb2.WatchJobRequest(id=jid, after_seq=last), metadata=self._metadata,
                                  timeout=remaining)
                try:
                    for proto in call:
                        if proto.seq <= last:  # never twice
                            continue
                        last = proto.seq
                        failing_since, backoff = None, 0.2
                        event = Event.from_proto(proto)
                        yield event
                        if event.finished:
                            return
                except grpc.RpcError as e:
                    if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED and deadline is not None:
                        raise MapError("DEADLINE_EXCEEDED", f"the job did not finish within {timeout} s", what,
                                       grpc.StatusCode.DEADLINE_EXCEEDED) from None
                    if e.code() not in _TRANSIENT:
                        raise MapError.from_rpc(e, what, self.address) from None
                    failure = MapError.from_rpc(e, what, self.address)
                else:
                    # The stream ended without the finishing event: the job had finished before
                    # `after_seq`, or the coordinator closed the stream — ask.
                    try:
                        if self.get(jid).finished:
                            return
                    except MapError as e:
                        if e.status not in _TRANSIENT:
                            raise
                        failure = e
                    if failure is None:  # (no status: a streak this ends only with an event)
                        failure = MapError("UNAVAILABLE", "the watch stream ended before the job finished", what)

                def give_up() -> MapError:
                    if deadline is not None and time.monotonic() >= deadline:
                        return MapError("DEADLINE_EXCEEDED", f"the job did not finish within {timeout} s ({failure.message})",
                                        what, grpc.StatusCode.DEADLINE_EXCEEDED)
                    return MapError(failure.code, f"gave up after {time.monotonic() - failing_since:.1f} s of reconnecting "
                                    f"from event #{last}: {failure.message}", what, failure.status)

                now = time.monotonic()
                if failing_since is None:
                    failing_since = now
                if now - failing_since >= reconnect_seconds or (deadline is not None and now >= deadline):
                    raise give_up()
                log.info("mapclient %s: %s; reconnecting after event #%d in %.1f s", what, failure.message, last, backoff)
                time.sleep(backoff)
                backoff = min(backoff * 2, 5.0)
                if channel is not None:
                    channel.close()
                channel = self._open_channel()  # a channel to a restarted coordinator, not the broken one's state
                stub = _stubs.job_service_pb2_grpc.JobServiceStub(channel)
                # Wait for the coordinator to be back, within what is left of the budget.
                left = reconnect_seconds - (time.monotonic() - failing_since)
                if deadline is not None:
                    left = min(left, deadline - time.monotonic())
                try:
                    grpc.channel_ready_future(channel).result(timeout=max(0.0, left))
                except grpc.FutureTimeoutError:
                    raise give_up() from None
                if failure.status in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED):
                    failing_since = None  # connected again: that outage is over (a refusal's streak goes on)
        finally:
            if call is not None:
                call.cancel()
            if channel is not None:
                channel.close()

    def wait(self, job: JobRef, *, timeout: Optional[float] = None) -> Job:
        """Watches the job to its end (riding out coordinator restarts, as :meth:`watch`) and
        returns it finished: ``c.wait(job).state == "SUCCEEDED"``. A job that fails is returned
        too (``state == "FAILED"``, ``error`` says why); only the calls failing raise MapError
        (DEADLINE_EXCEEDED past ``timeout`` seconds)."""
        for _ in self.watch(job, timeout=timeout):
            pass
        return self.get(job)

    def follow(self, job: JobRef, *, file: Optional[TextIO] = None, timeout: Optional[float] = None) -> Job:
        """As :meth:`wait`, printing each event to ``file`` (default ``sys.stdout``) as it
        happens, one line each, as ``mapctl watch`` does off a terminal."""
        out = file if file is not None else sys.stdout
        for event in self.watch(job, timeout=timeout):
            print(event, file=out, flush=True)
        return self.get(job)

    # --- planner ------------------------------------------------------------------------------

    def plan(self, model: Optional[str] = None, *, module: Any = None, example_inputs: Any = None, graph: Any = None,
             mapctl: Optional[str] = None, input_ranges: Optional[dict] = None, **fields: Any) -> Any:
        """Plans the model for ``ranks`` devices (default 1) without running anything
        (``PlannerService.Plan``, what ``mapctl plan`` does locally) and returns the
        ``mapd.v1.PlanResponse``: ``fits``; when it fits, ``plan`` (as ``mapctl plan --save``
        writes it) and ``summary`` ("mesh 2x2, ZeRO-1, ..."); otherwise ``min_memory_bytes``, the
        least memory any plan needs; ``search_seconds``.

        The model and keyword fields are :meth:`submit`'s; ``ranks``, ``mesh``, ``device_type``,
        ``memory_per_device``, ``optimizer``, ``zero``, ``recompute``, ``micro_batches``,
        ``precision``, ``pipeline_stages`` and ``pin`` count; ``steps`` and ``data`` are not used.
        A budget nothing fits is not an error (``fits`` is false).

        Raises:
            TypeError, ValueError: as :meth:`submit`.
            MapError: INVALID_ARGUMENT for a bad spec, an unknown model or op.
        """
        spec = self._spec("plan", model, module, example_inputs, graph, mapctl, fields, {"ranks": 1}, input_ranges)
        return self._call("plan", self._planner.Plan, _stubs.planner_service_pb2.PlanRequest(spec=spec))

    def profile(self, model: Optional[str] = None, *, module: Any = None, example_inputs: Any = None, graph: Any = None,
                mapctl: Optional[str] = None, **fields: Any) -> Any:
        """Profiles the model on one device (``PlannerService.Profile``, ``mapctl profile``'s
        prediction): the ``mapd.v1.ProfileResponse`` with trainable ``parameters`` and their bytes,
        forward and backward FLOPs, ``predicted_peak_bytes`` and where (``peak_at``), and
        ``predicted_step_seconds`` on ``device_type``. Arguments as :meth:`plan`."""
        spec = self._spec("profile", model, module, example_inputs, graph, mapctl, fields, {"ranks": 1})
        return self._call("profile", self._planner.Profile, _stubs.planner_service_pb2.ProfileRequest(spec=spec))

    # --- the cluster --------------------------------------------------------------------------

    def workers(self) -> builtins.list:
        """The registered workers (``mapd.v1.Worker`` messages: id, hostname, state ALIVE or LOST,
        devices with their memory, last heartbeat, metrics address), as ``mapctl workers``."""
        return list(self._call("workers", self._workers.List, _stubs.workers_pb2.ListWorkersRequest()).workers)

    def health(self) -> str:
        """The coordinator's ``grpc.health.v1`` status: ``"SERVING"`` when up (no token needed)."""
        if _stubs.health_pb2 is None:
            raise MapError("UNIMPLEMENTED", "this mapclient was built without grpc/health/v1/health.proto", "health")
        stub = _stubs.health_pb2_grpc.HealthStub(self._channel)
        try:
            got = stub.Check(_stubs.health_pb2.HealthCheckRequest(), timeout=self.timeout)
        except grpc.RpcError as e:
            raise MapError.from_rpc(e, "health", self.address) from None
        return _stubs.health_pb2.HealthCheckResponse.ServingStatus.Name(got.status)


def _set_elastic(policy: Any, value: Any) -> None:
    """An elastic policy from "MIN[:MAX]", (MIN, MAX), {"min_devices": .., "max_devices": ..} or
    a ``mapd.v1.ElasticPolicy``."""
    if isinstance(value, type(policy)):
        policy.CopyFrom(value)
        return
    if isinstance(value, str):
        m = re.fullmatch(r"(\d+)(?::(\d+))?", value.strip())
        if not m:
            raise ValueError("an elastic policy is 'MIN' or 'MIN:MAX' devices (e.g. '2:4')")
        bounds: Dict[str, int] = {"min_devices": int(m.group(1)), "max_devices": int(m.group(2) or 0)}
    elif isinstance(value, dict):
        unknown = set(value) - {"min_devices", "max_devices"}
        if unknown:
            raise TypeError(f"unknown elastic field(s) {', '.join(sorted(unknown))}; the fields are min_devices, max_devices")
        bounds = {k: int(v) for k, v in value.items()}
    elif isinstance(value, (tuple, builtins.list)) and 1 <= len(value) <= 2:
        bounds = {"min_devices": int(value[0]), "max_devices": int(value[1]) if len(value) == 2 else 0}
    else:
        raise TypeError("an elastic policy is 'MIN:MAX', (MIN, MAX) or a dict of min_devices and max_devices")
    policy.min_devices = bounds.get("min_devices", 0)
    policy.max_devices = bounds.get("max_devices", 0)


def _set_field(spec: Any, key: str, value: Any) -> None:
    """Sets JobSpec field `key`, converting what Python callers naturally give."""
    if key == "mesh":
        if isinstance(value, str):
            if not re.fullmatch(r"\d+(x\d+)*", value.strip()):
                raise ValueError("a mesh is 'AxB' (outermost axis first) or a sequence of ints")
            dims: Sequence[int] = [int(d) for d in value.strip().split("x")]
        elif isinstance(value, int) and not isinstance(value, bool):
            dims = [value]
        else:
            dims = [int(d) for d in value]
        del spec.mesh[:]
        spec.mesh.extend(dims)
        return
    if key == "memory_per_device":
        spec.memory_per_device = parse_bytes(value)
        return
    if key == "elastic":
        _set_elastic(spec.elastic, value)
        return
    if key == "training":
        if not isinstance(value, dict):
            raise TypeError("training: a dict of its fields (steps, lr, weight_decay, ...), or give them as keywords")
        for k, v in value.items():
            if k not in _training_fields():
                raise TypeError(f"training: unknown field {k!r}; its fields are: {', '.join(_training_fields())}")
            _set_field(spec, k, v)
        return
    if key not in spec.DESCRIPTOR.fields_by_name and key in _training_fields():
        spec = spec.training  # a training field given flat, as `mapctl submit --lr` is
    field = spec.DESCRIPTOR.fields_by_name[key]
    if field.type == field.TYPE_STRING:
        if isinstance(value, bool):
            raise TypeError("a string (or a count)")
        if isinstance(value, int):  # zero=2, micro_batches=4, pipeline_stages=2
            value = str(value)
        elif key == "recompute" and isinstance(value, (builtins.list, tuple)):
            value = ",".join(value)
    elif field.type == field.TYPE_DOUBLE and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if isinstance(value, bool) and field.type != field.TYPE_BOOL:
        raise TypeError("a bool where a number is due")
    setattr(spec, key, value)
