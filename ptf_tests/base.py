"""The one base test: a fresh pipeline and routes per test, frames on PTF's veths.

Kept small on purpose. Everything the tests know about the switch comes from
``--test-params`` (set by ``python -m ptf_tests.run``): the P4Runtime address,
the target kind and its runtime-CLI port (for ``set_queue_rate``), and the
switch's PID (to freeze it while its queues fill). Tables are programmed with
:mod:`p4client.p4rt` by P4Info *names*, never IDs.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import ptf
from ptf import testutils
from ptf.base_tests import BaseTest

from echelon.waiting import WaitTimeout, wait_until
from p4client.bmruntime import RuntimeApiError, RuntimeClient
from p4client.p4rt import SwitchConnection
from p4client.p4rt_errors import P4RuntimeConnectionError
from ptf_tests import entries
from ptf_tests import packets as pk
from targets.process import freeze_process

#: How long a frame the switch should forward may take to show up.
RX_TIMEOUT_S = 2.0


class EchelonTest(BaseTest):  # type: ignore[misc]
    """Connects, pushes the pipeline (clearing tables), installs one /32 route per port."""

    dataplane: Any
    sw: SwitchConnection

    def setUp(self) -> None:
        super().setUp()
        self.dataplane = ptf.dataplane_instance
        self.p: dict[str, Any] = testutils.test_params_get({})
        self.sw = SwitchConnection(self.p["grpc_addr"], int(self.p.get("device_id", 0)))
        self.addCleanup(self.sw.close)  # runs even when setUp fails half-way
        self.rated: set[int] = set()
        # A controller stopped by the previous test may still hold the primary role
        # for a moment: retry until ours is the primary session.
        self.wait_for(self._connect_primary, "the primary P4Runtime session")
        # Both targets run p4c's BMv2 JSON (the soft switch compiles it at load).
        config = Path(self.p["bmv2_json"]).read_bytes()
        self.sw.set_pipeline(self.p["p4info"], config)  # also empties every table
        self.sw.insert(entries.routes(self.sw))
        self.dataplane.flush()

    def _connect_primary(self) -> bool:
        try:
            if self.sw.connect():
                return True
        except P4RuntimeConnectionError:
            # The previous test's session (same election id) may not be gone yet:
            # the switch refuses the duplicate id; retry until it is.
            pass
        self.sw.close()
        return False

    def tearDown(self) -> None:
        try:
            self.thaw()  # never leave a frozen switch behind a failed test
            for port in sorted(self.rated):
                self.set_queue_rate(port, 0)
        finally:
            super().tearDown()

    # ------------------------------------------------------------ control plane

    def register(
        self, echelon_id: int, class_id: int, prio: int, sources: Sequence[int],
        ranges: Sequence[tuple[int, int, int]] = (),
    ) -> None:  # fmt: skip
        """Install one echelon the way the controller does (see :mod:`ptf_tests.entries`)."""
        self.sw.insert(entries.echelon(self.sw, echelon_id, class_id, prio, sources, ranges))

    def counter(self, name: str, index: int) -> tuple[int, int]:
        """``(packets, bytes)`` of ``EchelonIngress.<name>[index]``."""
        return self.sw.read_counter(f"EchelonIngress.{name}", index)[index]

    def wait_for(self, cond: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
        """:func:`echelon.waiting.wait_until`, failing the test at the deadline."""
        try:
            wait_until(cond, timeout, what, 0.01)
        except WaitTimeout as exc:
            self.fail(str(exc))

    # ------------------------------------------------------------ target control

    def set_queue_rate(self, port: int, pps: int) -> None:
        """``set_queue_rate`` on every priority queue of ``port`` through the target's
        Thrift runtime API; ``pps == 0`` means unlimited (BMv2 turns 0 into a zero gap)."""
        try:
            with RuntimeClient(int(self.p["thrift_port"])) as rt:
                rt.set_queue_rate(pps, port)
        except RuntimeApiError as exc:
            self.fail(str(exc))
        (self.rated.add if pps else self.rated.discard)(port)

    def freeze(self) -> None:
        freeze_process(int(self.p["switch_pid"]))

    def thaw(self) -> None:
        os.kill(int(self.p["switch_pid"]), signal.SIGCONT)

    # ------------------------------------------------------------ dataplane

    def send(self, port: int, frame: bytes) -> None:
        testutils.send_packet(self, port, frame)

    def receive(self, port: int, timeout: float = RX_TIMEOUT_S) -> tuple[bytes, float]:
        """The next frame out of ``port`` and when PTF saw it (``time.time()``)."""
        res = testutils.dp_poll(self, port_number=port, timeout=timeout)
        if not isinstance(res, self.dataplane.PollSuccess):
            self.fail(f"no frame on port {port} within {timeout} s")
        return bytes(res.packet), float(res.time)

    def expect(self, port: int, frames: Sequence[bytes]) -> None:
        """The next frames out of ``port`` are exactly ``frames``, in order, byte for byte."""
        got = [self.receive(port)[0] for _ in frames]
        for i, (want, have) in enumerate(zip(frames, got, strict=True)):
            why = f"frame {i} on port {port}: got {pk.describe(have)}, want {pk.describe(want)}"
            self.assertEqual(have, want, why)
            self.assertTrue(pk.ipv4_checksum_ok(have), f"frame {i}: bad IPv4 checksum")

    def expect_nothing_else(self) -> None:
        testutils.verify_no_other_packets(self, timeout=0.2)
