"""The big-switch network model."""

from __future__ import annotations

import pytest

from echelon.errors import SpecError
from echelon.network import BigSwitch
from echelon.schedule import Network


def test_links_and_paths() -> None:
    net = BigSwitch({"a": 10.0, "b": 20.0})
    assert isinstance(net, Network)
    assert dict(net.links) == {"up:a": 10.0, "down:a": 10.0, "up:b": 20.0, "down:b": 20.0}
    assert net.path("a", "b") == ("up:a", "down:b")
    assert net.path("b", "a") == ("up:b", "down:a")
    assert net.path("a", "a") == ()


def test_uniform_and_errors() -> None:
    net = BigSwitch.uniform(["x", "y", "z"], 5)
    assert set(net.links.values()) == {5.0} and len(net.links) == 6
    with pytest.raises(SpecError) as info:
        net.path("x", "nope")
    assert info.value.field == "path.dst"
    with pytest.raises(SpecError) as info:
        BigSwitch({"a": 0})
    assert info.value.field == "capacity.a"
    with pytest.raises(SpecError):
        BigSwitch({})
