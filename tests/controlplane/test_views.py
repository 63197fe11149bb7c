"""The API's views of an EchelonFlow and of a switch's sync state."""

from __future__ import annotations

from pathlib import Path

from controlplane.entries import count_by_table
from controlplane.views import echelonflow_view, switch_view
from echelon.model import EchelonFlow, Flow
from tests.controlplane.inproc import running_controller


def test_an_echelonflow_view_carries_every_flow_with_its_offset_in_us() -> None:
    ef = EchelonFlow("j/0/g", "j", "g", (Flow(0, "h1", "h4", 1000, 0.0),
                                         Flow(1, "h2", "h4", 2000, 0.0025)), 1.5)  # fmt: skip
    view = echelonflow_view(ef)
    assert (view["name"], view["group"], view["t_ref"]) == ("j/0/g", "g", 1.5)
    assert [(f["src"], f["size"], f["offset_us"]) for f in view["flows"]] == [
        ("h1", 1000, 0),
        ("h2", 2000, 2500),
    ]


def test_a_switch_view_is_what_status_reports_for_it(tmp_path: Path) -> None:
    with running_controller(tmp_path) as c:
        ((name, agent),) = c.agents.items()
        view = switch_view(agent, count_by_table(c.desired(name)))
        assert view["connected"] and view["primary"] and view["in_sync"]
        assert view["grpc"] == agent.switch.grpc and view["entries"]
        assert c.status()["switches"][name]["grpc"] == view["grpc"]
        assert c.status()["switches"][name]["entries"] == view["entries"]
