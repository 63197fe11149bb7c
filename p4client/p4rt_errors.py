"""P4Runtime errors as typed exceptions, with per-update statuses of a failed Write.

P4Runtime reports which updates of a WriteRequest failed in the
``grpc-status-details-bin`` trailer (a ``google.rpc.Status`` whose details are one
``p4.v1.Error`` per update, in order). Decoding that here lets the controller undo
exactly the updates that applied, and tests assert on gRPC code names.
"""

from __future__ import annotations

from dataclasses import dataclass

import grpc
from finsy.proto import p4r as p4runtime_pb2
from finsy.proto import rpc_code as code_pb2
from finsy.proto import rpc_status as status_pb2

from echelon.errors import EchelonError


class P4RuntimeError(EchelonError):
    """A P4Runtime RPC failed. ``code`` is the gRPC status name (``UNAVAILABLE``...)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


class P4RuntimeConnectionError(P4RuntimeError):
    """The switch could not be reached, or the stream/arbitration did not complete."""


@dataclass(frozen=True)
class UpdateStatus:
    """The outcome of one update of a failed WriteRequest (``code`` "OK" if it applied)."""

    index: int
    code: str
    message: str


class P4RuntimeWriteError(P4RuntimeError):
    """A WriteRequest failed; ``statuses`` has one entry per update of the failing chunk
    (indices relative to the whole ``write`` call) and ``applied`` counts updates of
    earlier chunks that went through.

    ``outcome_known`` is False when the switch's per-update statuses did not come back
    (no or incomplete ``grpc-status-details-bin``, e.g. gRPC refused an oversized
    trailer): ``statuses`` are then a guess and the caller must read the switch back
    instead of trusting them."""

    def __init__(
        self,
        code: str,
        message: str,
        statuses: list[UpdateStatus],
        applied: int,
        outcome_known: bool = True,
    ) -> None:
        self.statuses = statuses
        self.applied = applied
        self.outcome_known = outcome_known
        detail = "; ".join(f"#{s.index} {s.code}: {s.message}" for s in self.failed[:5])
        super().__init__(code, f"{message} [{detail}]" if detail else message)

    @property
    def failed(self) -> list[UpdateStatus]:
        return [s for s in self.statuses if s.code != "OK"]

    @property
    def succeeded_indices(self) -> list[int]:
        """Updates that did apply: earlier chunks plus OK updates of the failing chunk."""
        return list(range(self.applied)) + [s.index for s in self.statuses if s.code == "OK"]

    @property
    def resource_exhausted(self) -> bool:
        return any(s.code == "RESOURCE_EXHAUSTED" for s in self.statuses) or (
            self.code == "RESOURCE_EXHAUSTED"
        )


def code_name(code: int) -> str:
    try:
        return str(code_pb2.Code.Name(code))
    except ValueError:
        return f"CODE_{code}"


def grpc_code(exc: grpc.RpcError) -> str:
    """The status name of a failed RPC (``UNKNOWN`` when gRPC gives none)."""
    code = exc.code()
    return str(code.name) if code is not None else "UNKNOWN"


def rpc_error(exc: grpc.RpcError, what: str) -> P4RuntimeError:
    code = grpc_code(exc)
    cls = (
        P4RuntimeConnectionError if code in ("UNAVAILABLE", "DEADLINE_EXCEEDED") else P4RuntimeError
    )
    return cls(code, f"{what}: {exc.details()}")


#: Request-level refusals: the switch checks these before applying any update, so
#: without per-update details they still mean "nothing applied".
NOTHING_APPLIED = frozenset({"PERMISSION_DENIED", "FAILED_PRECONDITION", "UNIMPLEMENTED"})


def write_statuses(exc: grpc.RpcError, offset: int, count: int) -> tuple[list[UpdateStatus], bool]:
    """Per-update errors from the ``grpc-status-details-bin`` trailer (P4Runtime §12.3),
    and whether they are the switch's own (one per update) rather than a guess."""
    for key, value in exc.trailing_metadata() or ():
        if key != "grpc-status-details-bin":
            continue
        try:
            st = status_pb2.Status.FromString(value)
        except Exception:  # a garbled trailer: fall through to "unknown"
            break
        out = []
        for i, anymsg in enumerate(st.details):
            err = p4runtime_pb2.Error()
            if anymsg.Unpack(err):
                out.append(UpdateStatus(offset + i, code_name(err.canonical_code), err.message))
        if len(out) == count:
            return out, True
        break
    code = grpc_code(exc)
    guess = [UpdateStatus(offset + i, code, str(exc.details())) for i in range(count)]
    return guess, code in NOTHING_APPLIED
