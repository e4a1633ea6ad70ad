"""What mapclient returns: Job, Event, Evaluation and JobState, read from the coordinator's protos."""
from __future__ import annotations

import dataclasses
import enum
import time
from typing import Any, Optional, Tuple


class JobState(str, enum.Enum):
    """A job's state (``mapd.v1.JobState``). A ``str`` enum: ``job.state == "SUCCEEDED"`` holds,
    and ``str(job.state)`` is the name.

    PENDING → PLANNING → RUNNING → SUCCEEDED | FAILED | CANCELLED, with RESTARTING after a lost
    worker or a coordinator restart (back to RUNNING from the last committed checkpoint).
    """

    UNSPECIFIED = "JOB_STATE_UNSPECIFIED"
    PENDING = "PENDING"
    PLANNING = "PLANNING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    RESTARTING = "RESTARTING"

    def __str__(self) -> str:
        return self.value

    @property
    def finished(self) -> bool:
        """SUCCEEDED, FAILED or CANCELLED: a finished job never changes again."""
        return self in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)

    @classmethod
    def from_proto(cls, value: int) -> "JobState":
        from mapclient._stubs import jobs_pb2
        name = jobs_pb2.JobState.Name(value) if value in jobs_pb2.JobState.values() else "JOB_STATE_UNSPECIFIED"
        try:
            return cls(name)
        except ValueError:  # a state added to the proto after this client was written
            return cls.UNSPECIFIED


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """The model evaluated after ``step``: the mean loss over ``batches`` evaluation batches."""

    step: int
    loss: float
    batches: int

    @classmethod
    def from_proto(cls, e: Any) -> "Evaluation":
        return cls(step=int(e.step), loss=float(e.loss), batches=int(e.batches))


@dataclasses.dataclass(frozen=True)
class Event:
    """One thing that happened to a job (``mapd.v1.JobEvent``), numbered by ``seq`` from 1.

    Progress events have ``step > 0`` with the step's ``loss``, ``lr``, ``items_per_second``
    (tokens or samples) and the worst rank's ``peak_bytes`` so far; evaluation events carry
    ``evaluation``. ``state`` is the job's state after the event. ``proto`` is the message itself.
    """

    job_id: int
    seq: int
    unix_seconds: float
    state: JobState
    message: str
    step: int = 0
    loss: float = 0.0
    lr: float = 0.0
    items_per_second: float = 0.0
    peak_bytes: int = 0
    evaluation: Optional[Evaluation] = None
    proto: Any = dataclasses.field(default=None, repr=False, compare=False)

    @property
    def finished(self) -> bool:
        """Whether this event finished the job (its state is SUCCEEDED, FAILED or CANCELLED)."""
        return self.state.finished

    @classmethod
    def from_proto(cls, e: Any) -> "Event":
        return cls(job_id=int(e.job_id), seq=int(e.seq), unix_seconds=float(e.unix_seconds), state=JobState.from_proto(e.state),
                   message=e.message, step=int(e.step), loss=float(e.loss), lr=float(e.lr),
                   items_per_second=float(e.items_per_second), peak_bytes=int(e.peak_bytes),
                   evaluation=Evaluation.from_proto(e.evaluation) if e.HasField("evaluation") else None, proto=e)

    def __str__(self) -> str:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.unix_seconds)) if self.unix_seconds > 0 else "-"
        if self.step > 0:
            return (f"{when}  #{self.seq:<3} step {self.step}  loss {self.loss:.4f}  lr {self.lr:.3g}  "
                    f"{self.items_per_second:.0f} items/s  peak {_bytes(self.peak_bytes)}")
        return f"{when}  #{self.seq:<3} {self.state.value:<10} {self.message}"


@dataclasses.dataclass(frozen=True)
class Job:
    """A job as the coordinator holds it (``mapd.v1.Job``).

    ``state`` is a :class:`JobState` (``job.state == "SUCCEEDED"`` works); ``error`` says why a
    FAILED job failed (with the status code's name); ``step``/``loss`` are the last step finished
    and its loss; ``spec`` is the ``mapd.v1.JobSpec`` with the coordinator's defaults filled in
    (``list()`` returns jobs whose ``spec.graph`` keeps only its name); ``proto`` is the whole
    ``mapd.v1.Job`` message. ``devices`` are the devices it runs on now (an elastic job's may be
    fewer than ``ranks``); ``restarts`` its resumes after lost workers.
    """

    id: int
    name: str
    state: JobState
    step: int
    steps: int
    ranks: int
    loss: float
    error: str
    plan_summary: str
    predicted_peak_bytes: int
    attempt: int
    devices: int
    restarts: int
    created_unix_seconds: float
    updated_unix_seconds: float
    last_evaluation: Optional[Evaluation]
    spec: Any = dataclasses.field(repr=False, compare=False)
    proto: Any = dataclasses.field(default=None, repr=False, compare=False)

    @property
    def finished(self) -> bool:
        """Whether the job is SUCCEEDED, FAILED or CANCELLED."""
        return self.state.finished

    @property
    def model(self) -> str:
        """The zoo spec the job trains, or ``"graph NAME"`` for a submitted graph."""
        return self.spec.model if self.spec.model else f"graph {self.spec.graph.name}"

    @property
    def mesh(self) -> Tuple[int, ...]:
        """The pinned mesh shape, if the spec gave one (the plan's is in ``plan_summary``)."""
        return tuple(int(d) for d in self.spec.mesh)

    @classmethod
    def from_proto(cls, j: Any) -> "Job":
        return cls(id=int(j.id), name=j.spec.name, state=JobState.from_proto(j.state), step=int(j.step), steps=int(j.spec.training.steps),
                   ranks=int(j.spec.ranks), loss=float(j.loss), error=j.error, plan_summary=j.plan_summary,
                   predicted_peak_bytes=int(j.predicted_peak_bytes), attempt=int(j.attempt),
                   devices=int(j.devices) or int(j.spec.ranks), restarts=int(j.restarts),
                   created_unix_seconds=float(j.created_unix_seconds), updated_unix_seconds=float(j.updated_unix_seconds),
                   last_evaluation=Evaluation.from_proto(j.last_evaluation) if j.HasField("last_evaluation") else None,
                   spec=j.spec, proto=j)


def _bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"
