"""MapError: every failure mapclient reports, with a gRPC status code's name."""
from __future__ import annotations

from typing import Optional

import grpc


class MapError(Exception):
    """A call the coordinator refused or could not answer, or a step of the client that failed.

    Attributes:
        code: the gRPC status code's name, as ``mapctl`` prints it in brackets:
            ``"UNAUTHENTICATED"``, ``"INVALID_ARGUMENT"``, ``"NOT_FOUND"``, ``"FAILED_PRECONDITION"``,
            ``"UNAVAILABLE"``, ``"DEADLINE_EXCEEDED"``, ... Failures of the client's own steps use
            the same names (no token: ``FAILED_PRECONDITION``; no ``mapctl``: ``NOT_FOUND``;
            ``mapctl import`` failing: the code it printed).
        message: the coordinator's message (the status details) or the client's.
        what: the call that failed (``"submit"``, ``"get 3"``, ``"watch 3"``, ...).
        status: the ``grpc.StatusCode``, or None when the code has no gRPC status.

    ``str(err)`` reads as mapctl's errors do: ``"get 99: job 99 not found [NOT_FOUND]"``.
    """

    def __init__(self, code: str, message: str, what: str = "", status: Optional[grpc.StatusCode] = None):
        self.code = code
        self.message = message
        self.what = what
        self.status = status
        super().__init__(f"{what + ': ' if what else ''}{message} [{code}]")

    @classmethod
    def from_rpc(cls, err: grpc.RpcError, what: str, address: str = "") -> "MapError":
        """The MapError of a failed gRPC call (`err` is a grpc.Call as well as an RpcError)."""
        status = err.code() if hasattr(err, "code") else None
        details = (err.details() if hasattr(err, "details") else None) or str(err)
        if status == grpc.StatusCode.UNAVAILABLE:
            details = f"cannot reach the coordinator{' at ' + address if address else ''} ({details}); is mapd running there?"
        name = status.name if status is not None else "UNKNOWN"
        return cls(name, details, what, status)
