"""Exceptions of the core package. Each names the offending field so a CLI can print it."""


class EchelonError(Exception):
    """Base class of every error the project raises on purpose."""


class SpecError(EchelonError, ValueError):
    """A job description or EchelonFlow spec is invalid.

    ``field`` is a dotted path into the description (e.g. ``stages[2].compute_s``).
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message

    def __reduce__(self) -> tuple[type["SpecError"], tuple[str, str]]:
        # picklable (Exception's default passes only args): the error of a simulation
        # in a worker process or Ray task reaches the driver as itself
        return (type(self), (self.field, self.message))


class UnknownHostError(SpecError):
    """A description names a host the topology does not have.

    Its own class so a caller can tell it from a malformed description without reading
    the message: the controller's API answers it with HTTP 422, not 400."""
