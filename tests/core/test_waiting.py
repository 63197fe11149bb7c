"""``echelon.waiting.wait_until``: the one deadline wait (the launcher, the daemon, the
emulation and the host agent's go file, tests/hostagent/test_agent.py, all use it)."""

from __future__ import annotations

import pytest

from echelon.waiting import WaitTimeout, wait_until


def test_returns_the_first_truthy_value() -> None:
    calls = iter([None, 0, "", "ready"])
    assert wait_until(lambda: next(calls), 5, "a value", interval=0.001) == "ready"


def test_retried_errors_mean_not_yet_and_are_named_at_the_deadline() -> None:
    def refused() -> bool:
        raise ConnectionRefusedError("port 1 refused")

    with pytest.raises(WaitTimeout, match=r"waiting for the server \(last: port 1 refused\)"):
        wait_until(refused, 0.05, "the server", interval=0.001, retry_on=(OSError,))


def test_other_errors_propagate_at_once() -> None:
    def broken() -> bool:
        raise KeyError("field")

    with pytest.raises(KeyError):
        wait_until(broken, 5, "anything", retry_on=(OSError,))
