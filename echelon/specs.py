"""Typed models of everything a user writes: the one validation layer of the project.

Job descriptions (``echelon.jobs``), explicit EchelonFlow specs, topology files
(``echelon.topology``), host-agent scenarios (``hostagent.scenario``) and the HTTP
API's bodies are pydantic v2 models built from the field types below. Why pydantic
and not hand-written checks: one declaration gives validation, the JSON schema the
API publishes, and unknown-key rejection (``extra="forbid"``) everywhere alike.

Why custom field types (``Seconds``, ``Bytes``, ...) rather than pydantic's
``float``/``int``: the messages stay the ones users already know (``must be a
number of seconds, got '4e6'``), and numbers are strict -- YAML turns ``4e6``
into a string and ``yes`` into a boolean, and silently coercing either would hide
a typo. :func:`validate` turns a ``ValidationError`` into the project's
:class:`~echelon.errors.SpecError` naming the field (``stages[2].fwd_s``).
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypeVar, get_args, get_origin

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, WithJsonSchema
from pydantic.functional_validators import PlainValidator
from pydantic_core import PydanticCustomError

from echelon.errors import SpecError

M = TypeVar("M", bound=BaseModel)

#: Largest byte size anywhere (1 PB): beyond it a value is a typo, and SQLite /
#: struct packing could not hold it (a size of 10**400 must be a field error).
MAX_BYTES = 10**15
#: Largest duration anywhere (a day): the wire carries offsets in 32 bits of µs.
MAX_SECONDS = 86400.0


class SpecModel(BaseModel):
    """Base of every user-facing model: unknown keys are errors, values immutable.

    Scalars are strict through the field types below (their validators refuse
    strings for numbers, numbers for booleans); pydantic's own strict mode stays off
    only so that a YAML/JSON list may fill a tuple field."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=False)


def fail(message: str, at: int | None = None) -> PydanticCustomError:
    """A field error with the project's wording; ``at`` names an item of a list field."""
    # the message goes through the context: a template would read '{...}' in reprs
    ctx: dict[str, Any] = {"m": message} if at is None else {"m": message, "at": at}
    return PydanticCustomError("spec", "{m}", ctx)


def _number(value: Any, what: str = "a number of seconds") -> float:
    """A finite float; anything else is "must be ``what``" (its type) or "must be finite"."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise fail(f"must be {what}, got {value!r}")
    try:
        out = float(value)
    except OverflowError:
        raise fail("must be finite, got a number beyond float range") from None
    if not math.isfinite(out):
        raise fail(f"must be finite, got {value!r}")
    return out


def _seconds(value: Any) -> float:
    out = _number(value)
    if out < 0:
        raise fail(f"must be non-negative, got {value}")
    if out > MAX_SECONDS:
        raise fail(f"must be at most {MAX_SECONDS:.0f} s (a day), got {value}")
    return out


def _non_negative(value: Any) -> float:
    out = _number(value, "a non-negative number")
    if out < 0:
        raise fail(f"must be a non-negative number, got {value!r}")
    return out


def _positive(value: Any) -> float:
    out = _number(value, "a positive number")
    if not out > 0:
        raise fail(f"must be a positive number, got {value!r}")
    return out


def _integer(value: Any, minimum: int, maximum: int) -> int:
    if isinstance(value, bool):
        raise fail(f"must be an integer, got {value!r}")
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # 4.0e6 is an integer written in YAML's float syntax
    if not isinstance(value, int):
        raise fail(f"must be an integer, got {value!r}")
    if value < minimum:
        raise fail(f"must be >= {minimum}, got {value}")
    if value > maximum:
        raise fail(f"must be <= {maximum}, got {value if value < 10**30 else 'a huge number'}")
    return value


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise fail(f"must be a non-empty string, got {value!r}")
    return _unicode(value)


def _unicode(value: Any) -> str:
    if not isinstance(value, str):
        raise fail(f"must be a string, got {value!r}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate ("\ud800" in JSON)
        raise fail(f"must be valid Unicode text, got {value!r}") from None
    return value


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise fail(f"must be true or false, got {value!r}")
    return value


_NUM = {"type": "number"}
#: A duration in seconds: a finite number >= 0 (ints accepted, strings not).
Seconds = Annotated[
    float,
    PlainValidator(_seconds),
    WithJsonSchema({**_NUM, "minimum": 0, "maximum": MAX_SECONDS, "description": "seconds"}),
]
#: A finite number >= 0 in some other unit than seconds (the field name says which).
NonNegative = Annotated[
    float, PlainValidator(_non_negative), WithJsonSchema({**_NUM, "minimum": 0})
]
#: A positive finite number (weights, link speeds).
Positive = Annotated[
    float, PlainValidator(_positive), WithJsonSchema({**_NUM, "exclusiveMinimum": 0})
]
#: A byte size: an integer >= 0 (integral floats such as 4.0e6 accepted).
Bytes = Annotated[
    int,
    PlainValidator(lambda v: _integer(v, 0, MAX_BYTES)),
    WithJsonSchema({"type": "integer", "minimum": 0, "maximum": MAX_BYTES, "description": "bytes"}),
]
#: A byte size of at least one byte.
PositiveBytes = Annotated[
    int,
    PlainValidator(lambda v: _integer(v, 1, MAX_BYTES)),
    WithJsonSchema({"type": "integer", "minimum": 1, "maximum": MAX_BYTES, "description": "bytes"}),
]
#: A count of at least one (micro-batches, degrees of parallelism).
Count = Annotated[
    int,
    PlainValidator(lambda v: _integer(v, 1, 2**31 - 1)),
    WithJsonSchema({"type": "integer", "minimum": 1}),
]
#: A count of zero or more (iterations, sequence numbers).
Index = Annotated[
    int,
    PlainValidator(lambda v: _integer(v, 0, 2**63 - 1)),
    WithJsonSchema({"type": "integer", "minimum": 0}),
]
#: A non-empty name (host, group, ...), valid Unicode.
Name = Annotated[str, PlainValidator(_text), WithJsonSchema({"type": "string", "minLength": 1})]
#: Free text, valid Unicode.
Text = Annotated[str, PlainValidator(_unicode), WithJsonSchema({"type": "string"})]
#: A boolean, strictly (YAML's ``yes`` is a string after a quote typo).
Flag = Annotated[bool, PlainValidator(_flag), WithJsonSchema({"type": "boolean"})]


def bounded_int(minimum: int, maximum: int, what: str = "") -> Any:
    """An integer type within ``minimum..maximum`` (ports, IDs)."""
    schema: dict[str, Any] = {"type": "integer", "minimum": minimum, "maximum": maximum}
    if what:
        schema["description"] = what
    return Annotated[
        int, PlainValidator(lambda v: _integer(v, minimum, maximum)), WithJsonSchema(schema)
    ]


# ---------------------------------------------------------------- errors


def field_path(loc: tuple[int | str, ...], where: str = "") -> str:
    """``("stages", 2, "fwd_s")`` -> ``stages[2].fwd_s`` (under ``where`` if given)."""
    out = where
    for part in loc:
        if isinstance(part, int):
            out = f"{out}[{part}]"
        elif part == "[key]":  # pydantic's marker for a bad mapping key
            continue
        else:
            out = f"{out}.{part}" if out else str(part)
    return out


def _model_at(model: type[BaseModel], loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The model class that owns the last element of ``loc`` (for 'allowed' lists)."""
    current: Any = model
    for part in loc[:-1]:
        current = _unwrap(current)
        if isinstance(part, int) or part == "[key]":
            continue
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(str(part))
            if field is None:
                return None
            current = field.annotation
        elif get_origin(current) in (dict, Mapping):
            current = get_args(current)[1]
        else:
            return None
    current = _unwrap(current)
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _unwrap(tp: Any) -> Any:
    """Strip Annotated/Optional/list/tuple/dict wrappers down to an element type."""
    for _ in range(6):
        origin = get_origin(tp)
        args = [a for a in get_args(tp) if a is not type(None) and a is not Ellipsis]
        if origin is Annotated or (origin is not None and args and len(args) <= 1):
            tp = args[0]
        else:
            return tp
    return tp


def spec_error(exc: ValidationError, model: type[BaseModel], where: str = "") -> SpecError:
    """The first error of ``exc`` as a :class:`SpecError` with today's wording."""
    errors = exc.errors(include_url=False, include_input=True)
    # an unknown key first (as the hand-written checks did): a typo'd optional field
    # also shows up as the real one "missing", and the typo is the thing to fix
    err = next((e for e in errors if e.get("type") == "extra_forbidden"), errors[0])
    first = _one_error(err, model, where)
    fields = {_one_error(e, model, where).field for e in errors if e is not err}
    fields.add(first.field)
    # a union's alternatives also report the enclosing field: name only the leaves
    leaves = {f for f in fields if not any(g.startswith((f + ".", f + "[")) for g in fields)}
    others = sorted(leaves - {first.field})
    if others:  # a file with several mistakes names them all, not one per attempt
        more = ", ".join(others[:MORE_ERRORS_SHOWN])
        extra = len(others) - MORE_ERRORS_SHOWN
        more += f" and {extra} more" if extra > 0 else ""
        return SpecError(first.field, f"{first.message} (also wrong: {more})")
    return first


#: How many further wrong fields a :func:`spec_error` message names.
MORE_ERRORS_SHOWN = 5


def _one_error(err: Any, model: type[BaseModel], where: str) -> SpecError:
    """One pydantic error as a :class:`SpecError` with today's wording."""
    loc = tuple(err.get("loc", ()))
    field = field_path(loc, where) or where or "value"
    kind = err.get("type", "")
    value = err.get("input")
    ctx = err.get("ctx") or {}
    if kind == "spec":
        if "at" in ctx:
            field = f"{field}[{ctx['at']}]"
        return SpecError(field, str(ctx.get("m", err.get("msg", ""))))
    if kind == "missing":
        return SpecError(field, "is required")
    if kind == "extra_forbidden":
        owner = _model_at(model, loc)
        allowed = sorted(owner.model_fields) if owner is not None else []
        close = difflib.get_close_matches(str(loc[-1]) if loc else "", allowed, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return SpecError(field, f"unknown field (allowed: {allowed}){hint}")
    if kind in ("model_type", "dict_type", "model_attributes_type", "dataclass_type"):
        return SpecError(field or "value", f"must be a mapping, got {type(value).__name__}")
    if kind in ("list_type", "tuple_type", "too_short"):
        return SpecError(field, "must be a non-empty list")
    if kind == "too_long":
        return SpecError(field, f"has more than {ctx.get('max_length')} items")
    if kind == "literal_error":
        return SpecError(field, f"must be one of {ctx.get('expected')}, got {value!r}")
    if kind in ("string_type", "string_too_short"):
        return SpecError(field, f"must be a non-empty string, got {value!r}")
    if kind == "string_pattern_mismatch":
        return SpecError(field, f"does not match {ctx.get('pattern')}: {value!r}")
    message = str(err.get("msg", "invalid"))
    return SpecError(field, message.removeprefix("Value error, "))


def _unicode_keys(data: Any, where: str) -> None:
    """Refuse a key pydantic cannot even read (a lone surrogate from JSON's ``\\ud800``),
    naming it escaped, rather than failing without a path."""
    if isinstance(data, Mapping):
        for key, value in data.items():
            if isinstance(key, str):
                try:
                    key.encode("utf-8")
                except UnicodeEncodeError:
                    shown = key.encode("utf-8", "backslashreplace").decode("utf-8")
                    raise SpecError(field_path((shown,), where), "not valid Unicode") from None
            _unicode_keys(value, field_path((str(key),), where))
    elif isinstance(data, list | tuple):
        for i, item in enumerate(data):
            _unicode_keys(item, field_path((i,), where))


def validate(model: type[M], data: Any, where: str = "") -> M:
    """``model.model_validate(data)``, a :class:`SpecError` naming the field if invalid."""
    if not isinstance(data, Mapping):
        raise SpecError(where or "value", f"must be a mapping, got {type(data).__name__}")
    _unicode_keys(data, where)
    try:
        return model.model_validate(dict(data))
    except ValidationError as exc:
        raise spec_error(exc, model, where) from None


def read_file(file: str | Path) -> Any:
    """A YAML or JSON file's content (JSON by a ``.json`` name, else YAML); an unreadable
    or unparsable file is a :class:`SpecError` naming it: the one reader of every file
    a user writes (job descriptions, topologies, scenarios, agent records)."""
    where = str(file)
    try:
        raw = Path(file).read_text()
    except OSError as exc:
        raise SpecError(where, f"cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise SpecError(where, "not a UTF-8 text file (YAML or JSON)") from None
    try:
        return json.loads(raw) if where.endswith(".json") else yaml.safe_load(raw)
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        raise SpecError(where, f"not valid YAML/JSON: {exc}") from None


# ---------------------------------------------------------------- plausibility


@dataclass(frozen=True)
class SpecWarning:
    """A valid but implausible value (a unit mix-up, most likely): printed, not fatal."""

    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


#: One compute step (a layer's or stage's forward, ...) this long is most likely ms.
LONG_STEP_S = 1.0
#: A transfer smaller than this many bytes is most likely MB written as bytes.
TINY_BYTES = 1000
#: A single transfer above this many bytes (100 GB) is most likely bits or a typo.
HUGE_BYTES = 100 * 10**9
#: Offsets / reference times this long in one iteration are most likely ms.
LONG_OFFSET_S = 10.0


def _is_bytes(key: str) -> bool:
    return key.endswith("_bytes") or key == "size"


def unit_warnings(data: Any, where: str = "") -> list[SpecWarning]:
    """Plausibility of units in a validated description (``model_dump`` form).

    Heuristics by field name: ``*_s`` are seconds (``fwd_s: 6`` meant as ms gives a
    162 s iteration), ``*_bytes``/``size`` are bytes (``activation_bytes: 4`` meant
    as MB). ``offset``/``t_ref`` are positions in an iteration, allowed to be longer.
    """
    out: list[SpecWarning] = []
    if isinstance(data, Mapping):
        for key, value in data.items():
            here = field_path((key,), where)
            if isinstance(value, bool) or not isinstance(value, int | float):
                out += unit_warnings(value, here)
                continue
            if key.endswith("_s") and value >= LONG_STEP_S:
                out.append(
                    SpecWarning(
                        here,
                        f"{value:g} s for one compute step is long: if you meant "
                        f"milliseconds, write {value / 1000:g}",
                    )
                )
            elif key in ("offset", "t_ref") and value >= LONG_OFFSET_S:
                out.append(
                    SpecWarning(
                        here,
                        f"{value:g} s into the iteration is long: if you meant "
                        f"milliseconds, write {value / 1000:g}",
                    )
                )
            elif _is_bytes(key) and 0 < value < TINY_BYTES:
                out.append(
                    SpecWarning(
                        here,
                        f"{value:g} bytes is tiny (sizes are in bytes): if you meant "
                        f"MB, write {value * 1e6:.0f}",
                    )
                )
            elif _is_bytes(key) and value > HUGE_BYTES:
                out.append(
                    SpecWarning(
                        here,
                        f"{value:.3g} bytes is {value / 1e9:.0f} GB for one transfer: "
                        "sizes are bytes, not bits (or did you mean MB?)",
                    )
                )
    elif isinstance(data, list | tuple):
        for i, item in enumerate(data):
            out += unit_warnings(item, field_path((i,), where))
    return out


T = TypeVar("T")
#: A non-empty list of records (a job's layers or stages); at most 4096 of them.
Records = Annotated[tuple[T, ...], Field(min_length=1, max_length=4096)]
