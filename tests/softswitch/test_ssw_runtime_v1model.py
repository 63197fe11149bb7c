"""The Thrift calls for clone sessions and meters (simple_switch_CLI's mirroring_add,
meter_set_rates), on the handler, against a committed clone.p4 / meters.p4 pipeline."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
from bm_runtime.standard import ttypes as std
from sswitch_runtime import ttypes as ssw

from p4client.p4info import P4Info
from softswitch.bm.pipeline import Pipeline
from softswitch.queueing import PriorityRateQueues
from softswitch.runtime import RuntimeHandler

BUILD = Path(__file__).resolve().parents[1] / "p4" / "programs" / "build"


def _handler(program: str) -> tuple[RuntimeHandler, Pipeline]:
    info = P4Info.load(BUILD / f"{program}.p4info.txtpb").proto
    pl = Pipeline(info, (BUILD / f"{program}.json").read_bytes(), 1)
    service = SimpleNamespace(pipeline=pl)
    queues: PriorityRateQueues[bytearray] = PriorityRateQueues(1)
    return RuntimeHandler(queues, threading.Lock(), service), pl  # type: ignore[arg-type]


def test_mirroring_sessions_over_thrift_are_the_pipelines_clone_sessions() -> None:
    h, pl = _handler("clone")
    h.mirroring_session_add(5, ssw.MirroringSessionConfig(port=3))
    assert pl.mirroring == {5: 3}
    assert h.mirroring_session_get(5).port == 3
    assert h.mirroring_mapping_get_egress_port(5) == 3
    h.mirroring_session_delete(5)
    with pytest.raises(ssw.InvalidMirroringOperation):
        h.mirroring_session_get(5)
    with pytest.raises(ssw.InvalidMirroringOperation):  # multicast sessions: not supported
        h.mirroring_session_add(6, ssw.MirroringSessionConfig(port=None, mgid=1))


def test_meter_rates_over_thrift() -> None:
    h, _pl = _handler("meters")
    rates = [std.BmMeterRateConfig(0.5, 10), std.BmMeterRateConfig(1.0, 20)]
    h.bm_meter_set_rates(0, "Ing.by_packets", 3, rates)
    got = h.bm_meter_get_rates(0, "Ing.by_packets", 3)
    assert [(r.units_per_micros, r.burst_size) for r in got] == [(0.5, 10), (1.0, 20)]
    with pytest.raises(std.InvalidMeterOperation):
        h.bm_meter_set_rates(0, "Ing.by_packets", 8, rates)
    with pytest.raises(std.InvalidMeterOperation):
        h.bm_meter_set_rates(0, "Ing.nope", 0, rates)
    with pytest.raises(std.InvalidMeterOperation):  # committed above peak
        h.bm_meter_array_set_rates(0, "Ing.by_bytes", list(reversed(rates)))
