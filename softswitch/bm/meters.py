"""Indirect meters (v1model ``meter``), metering as BMv2 1.15's ``Meter`` does.

A meter cell is a two-rate three-color marker (color-blind trTCM): each cell has
a committed and a peak rate (units per microsecond) and burst (units), units
being packets or bytes of the ingress frame. A cell nobody configured marks
everything GREEN (0). Configured, its buckets start full and refill, capped at
their bursts, with ``floor(µs since the switch started x rate)`` tokens counted
from one time origin (no drift from repeated rounding), exactly how BMv2 counts
them; the peak bucket is checked first: short of tokens -> RED (2); then the
committed one: short -> YELLOW (1), and only a GREEN packet takes from both.

``execute_meter(meter, index, dst)`` writes the color into ``dst``; an index
past the end does nothing (BMv2's debug builds: its release builds do not
check). P4Runtime ``MeterEntry`` (``cir``/``pir`` per second, bursts) and Thrift
``bm_meter_set_rates`` configure cells (``softswitch/p4rt_entities.py``,
``softswitch/runtime.py``). A direct meter (:class:`DirectMeter`) has a cell per
entry of its table, configured by P4Runtime ``DirectMeterEntry``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from softswitch.bm.expr import PrimitiveFn, compile_expr
from softswitch.bm.layout import Layout
from softswitch.errors import InvalidArgument

GREEN, YELLOW, RED = 0, 1, 2
#: One rate: [units per µs, burst, tokens, tokens counted since the origin].
_Rate = list[float]


class MeterArray:
    """``size`` trTCM cells of one unit (``packets`` or ``bytes``)."""

    def __init__(
        self, name: str, size: int, unit: str, origin: float, clock: Callable[[], float]
    ) -> None:
        self.name = name
        self._clock = clock
        self.size = size
        self.bytes = unit == "bytes"
        self._origin = origin
        #: per cell: None (unconfigured) or [peak rate, committed rate]
        self.cells: list[list[_Rate] | None] = [None] * size
        self._lock = threading.Lock()  # the packet thread and a config write

    def set_rates(self, index: int, rates: list[tuple[float, int]] | None) -> None:
        """Configure cell ``index`` with [(committed rate, burst), (peak rate, burst)]
        (units per µs), or reset it (None); buckets start full."""
        if rates is not None and rates[0][0] > rates[1][0]:
            raise InvalidArgument(f"{self.name}[{index}]", "committed rate above peak rate")
        cell = None if rates is None else [[r, b, b, 0] for r, b in reversed(rates)]
        with self._lock:
            self.cells[index] = cell  # type: ignore[assignment]

    def rates(self, index: int) -> list[tuple[float, int]] | None:
        """The cell's [(committed rate, burst), (peak rate, burst)], None if unconfigured."""
        cell = self.cells[index]
        return None if cell is None else [(r[0], int(r[1])) for r in reversed(cell)]

    def execute(self, index: int, length: int) -> int:
        cell = self.cells[index]
        if cell is None:
            return GREEN
        units = length if self.bytes else 1
        micros = int((self._clock() - self._origin) * 1e6)
        color = GREEN
        with self._lock:
            for i, rate in enumerate(cell):
                since = int(micros * rate[0])
                rate[2] = min(rate[2] + since - rate[3], rate[1])
                rate[3] = since
                if rate[2] < units:
                    color = RED if i == 0 else YELLOW
                    break
                rate[2] -= units
        return color


class DirectMeter:
    """A direct meter: one cell per entry of its table, run when the entry is hit.

    BMv2 executes a table's direct meter on a hit, before the entry's action, and
    writes the color into the meter's ``result_target``; a miss (the default action)
    does not touch it. A new entry's cell is unconfigured (GREEN); a modified entry
    keeps its cell; P4Runtime ``DirectMeterEntry`` configures it."""

    def __init__(self, array: MeterArray, table: str, target: tuple[int, int, int | None]):
        self.array = array
        self.table = table
        self._target = target  # (slot, mask, raw slot to clear or None)
        self._length = -1  # the ingress-length slot, set by bind()
        self.index: dict[tuple[Any, int], int] = {}
        self._free = list(range(array.size - 1, -1, -1))

    def bind(self, length: int) -> None:
        self._length = length

    def wrap(self, key: Any, priority: int, call: tuple[Any, tuple[int, ...]]) -> Any:
        """The entry's call, preceded by its meter (``orig`` keeps the action's closure)."""
        ident = (key, priority)
        i = self.index.get(ident)
        if i is None:
            i = self.index[ident] = self._free.pop()
            self.array.set_rates(i, None)
        fn, args = call
        slot, mask, raw = self._target
        run, length = self.array.execute, self._length

        def metered(v: list[int], a: Sequence[int]) -> None:
            v[slot] = run(i, v[length]) & mask
            if raw is not None:
                v[raw] = -1
            fn(v, a)

        metered.orig = fn  # type: ignore[attr-defined]
        return metered, args

    def forget(self, key: Any, priority: int) -> None:
        i = self.index.pop((key, priority), None)
        if i is not None:
            self._free.append(i)


def meter_arrays(
    j: dict[str, Any], lay: Layout, clock: Callable[[], float] = time.monotonic
) -> tuple[dict[str, MeterArray], dict[str, DirectMeter]]:
    """The program's indirect meters by name, and its direct meters by table."""
    origin = clock()
    out: dict[str, MeterArray] = {}
    direct: dict[str, DirectMeter] = {}
    for m in j.get("meter_arrays", []):
        if int(m.get("rate_count", 2)) != 2:
            raise InvalidArgument(m["name"], f"{m.get('rate_count')} rates (trTCM has 2)")
        array = MeterArray(m["name"], int(m["size"]), str(m.get("type")), origin, clock)
        if m.get("is_direct"):
            ref = m.get("result_target")
            if not ref or "binding" not in m:
                raise InvalidArgument(m["name"], "a direct meter without binding/result_target")
            slot, width = lay.field(ref, write=True)
            target = (slot, (1 << width) - 1, lay.raw_slot(ref))
            direct[str(m["binding"])] = DirectMeter(array, str(m["binding"]), target)
        else:
            out[m["name"]] = array
    return out, direct


def execute_meter(
    lay: Layout, meters: dict[str, MeterArray], params: list[Any], where: str, length: int
) -> PrimitiveFn:
    """``execute_meter(meter_array, index, dst)``; ``length`` is the ingress-length slot."""
    if len(params) != 3 or params[0].get("type") != "meter_array":
        raise InvalidArgument(where, "expected (meter_array, index, field)")
    meter = meters.get(params[0]["value"])
    if meter is None:
        raise InvalidArgument(where, f"unknown meter {params[0]['value']!r}")
    index = compile_expr(lay, params[1], where)
    if params[2].get("type") != "field":
        raise InvalidArgument(where, f"meter color into a {params[2].get('type')!r}")
    slot, width = lay.field(params[2]["value"], write=True)
    mask, size, run = (1 << width) - 1, meter.size, meter.execute

    def do_meter(v: list[int], a: Sequence[int]) -> None:
        i = index(v, a)
        if i < size:
            v[slot] = run(i, v[length]) & mask

    return do_meter
