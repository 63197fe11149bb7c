"""Errors of the soft switch, each carrying the gRPC status code the P4Runtime spec asks for."""

from __future__ import annotations

import grpc

from echelon.errors import EchelonError


class SwitchError(EchelonError):
    """Base class of soft-switch errors; ``field`` names what was wrong."""

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class InvalidArgument(SwitchError):
    """The request names an unknown object or carries a malformed value."""

    code = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(SwitchError):
    """The entry (or device) the request refers to does not exist."""

    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(SwitchError):
    """INSERT of an entry whose key is already installed."""

    code = grpc.StatusCode.ALREADY_EXISTS


class ResourceExhausted(SwitchError):
    """INSERT into a table that holds its P4Info ``size`` entries already."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class FailedPrecondition(SwitchError):
    """The request needs state the switch does not have yet (e.g. no pipeline)."""

    code = grpc.StatusCode.FAILED_PRECONDITION


class PermissionDenied(SwitchError):
    """The writer is not the primary controller of the device/role."""

    code = grpc.StatusCode.PERMISSION_DENIED


class Unimplemented(SwitchError):
    """A valid request this switch does not support."""

    code = grpc.StatusCode.UNIMPLEMENTED


class UsageError(EchelonError):
    """Bad command-line or runtime-CLI input; ``field`` names the argument."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message
