"""Errors of the soft switch, each carrying the gRPC status code the P4Runtime spec asks for.

Both kinds are :class:`~echelon.errors.SpecError` subclasses: ``field`` names what was wrong
(a request's field, a command-line argument), ``message`` why, and ``str(err)`` is
``"field: message"``, the text a gRPC status or the CLI's ``error:`` line carries.
"""

from __future__ import annotations

import grpc

from echelon.errors import SpecError


class SwitchError(SpecError):
    """Base class of the errors a P4Runtime request gets; ``code`` is its gRPC status."""

    code: grpc.StatusCode = grpc.StatusCode.UNKNOWN


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


class UsageError(SpecError):
    """Bad command-line or runtime-CLI input; ``field`` names the argument."""
