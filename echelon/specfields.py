"""Small validators for job descriptions.

Every check raises :class:`echelon.errors.SpecError` with the dotted path of the
offending field (``stages[2].fwd_s``), so a CLI can tell the user exactly what to
fix. Numbers are checked strictly: YAML turns ``4e6`` into a string and ``yes``
into a boolean, and silently accepting either would hide a typo.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from typing import Any, TypeVar

from echelon.errors import SpecError

T = TypeVar("T")


def path(where: str, key: str | int) -> str:
    """Join a field path: ``path("stages", 2)`` -> ``stages[2]``."""
    if isinstance(key, int):
        return f"{where}[{key}]"
    return f"{where}.{key}" if where else key


def check_keys(data: Mapping[str, Any], allowed: Collection[str], where: str) -> None:
    """Reject unknown keys: a misspelt optional field would otherwise be ignored."""
    for key in data:
        if key not in allowed:
            raise SpecError(path(where, str(key)), f"unknown field (allowed: {sorted(allowed)})")


def mapping(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise SpecError(where or "job", f"must be a mapping, got {type(value).__name__}")
    return value


def seconds(value: Any, where: str, *, positive: bool = False) -> float:
    """A duration in seconds: a real number, non-negative (positive if asked)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise SpecError(where, f"must be a number of seconds, got {value!r}")
    out = float(value)
    if out != out or out in (float("inf"), float("-inf")):
        raise SpecError(where, f"must be finite, got {value!r}")
    if out < 0 or (positive and out == 0):
        raise SpecError(where, f"must be {'positive' if positive else 'non-negative'}, got {value}")
    return out


def count(value: Any, where: str, *, minimum: int = 0) -> int:
    """An integer (bytes, counts); floats are accepted only when integral (``4.0e6``)."""
    if isinstance(value, bool):
        raise SpecError(where, f"must be an integer, got {value!r}")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int):
        raise SpecError(where, f"must be an integer, got {value!r}")
    if value < minimum:
        raise SpecError(where, f"must be >= {minimum}, got {value}")
    return value


def text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise SpecError(where, f"must be a non-empty string, got {value!r}")
    return value


def host(value: Any, where: str, hosts: Collection[str]) -> str:
    name = text(value, where)
    if name not in hosts:
        raise SpecError(where, f"host {name!r} is not one of the job's hosts {sorted(hosts)}")
    return name


def records(data: Mapping[str, Any], key: str, cls: type[T], where: str = "") -> tuple[T, ...]:
    """Parse the non-empty list ``data[key]`` into instances of the dataclass ``cls``.

    Fields annotated ``float`` are seconds, ``int`` are byte sizes (non-negative);
    fields with a default are optional. Keeping this generic means every paradigm's
    per-layer or per-stage record is validated the same way.
    """
    here = path(where, key)
    if key not in data:
        raise SpecError(here, "is required")
    items = data[key]
    if not isinstance(items, list | tuple) or not items:
        raise SpecError(here, "must be a non-empty list")
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    names = [f.name for f in fields]
    out: list[T] = []
    for i, raw in enumerate(items):
        item_where = path(here, i)
        item = mapping(raw, item_where)
        check_keys(item, names, item_where)
        values: dict[str, Any] = {}
        for f in fields:
            fw = path(item_where, f.name)
            if f.name not in item:
                if f.default is dataclasses.MISSING:
                    raise SpecError(fw, "is required")
                continue
            raw_value = item[f.name]
            values[f.name] = (
                seconds(raw_value, fw) if f.type in ("float", float) else count(raw_value, fw)
            )
        out.append(cls(**values))
    return tuple(out)


def plain(value: Any) -> Any:
    """Dataclasses/tuples -> dicts/lists, the form ``load_job`` reads back.

    Fields still at their default are left out, which keeps descriptions short
    and never emits a field the paradigm does not accept.
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: plain(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if f.default is dataclasses.MISSING or getattr(value, f.name) != f.default
        }
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value
