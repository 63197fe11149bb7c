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
