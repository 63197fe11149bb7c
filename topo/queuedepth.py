"""Each priority queue's depth over time at the bottleneck, sampled while a policy plays.

Two views of the same port, sampled every ``INTERVAL_S``:

* the bottleneck shaper (``tc -s qdisc show`` of its eight leaf queues, one per
  switch priority, :func:`topo.tc.backlog_by_priority`): the emulated port where
  the demo's packets actually wait (docs/topology.md: the switch's own queues are
  unshaped, so a backlog builds behind the shaper, not in the switch);
* the switch's own egress queues of the port feeding the shaper, from the echelon
  program's telemetry register ``queue_depth`` (:mod:`controlplane.queues`, over
  the Thrift runtime port): what the P4 program saw when packets left.

:func:`topo.report.plot_queue_depths` draws them, one panel per policy.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from echelon.constants import NUM_PRIORITIES, REG_QUEUE_DEPTH
from p4client.bmruntime import RuntimeApiError, RuntimeClient
from topo import tc
from topo.net import ShapedPort

#: Seconds between samples (each: one ``tc`` run and one Thrift register read on the
#: sampler's one connection).
INTERVAL_S = 0.05


class QueueSampler:
    """Samples one shaped port (and the switch port feeding it) until stopped."""

    def __init__(self, port: ShapedPort, thrift_port: int) -> None:
        self.port = port
        self.thrift_port = thrift_port
        self.t: list[float] = []
        self.bottleneck: list[dict[int, int]] = []
        self.switch: list[dict[int, int]] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="queue-sampler", daemon=True)
        #: one Thrift connection for the run, opened again after a failed sample
        self._rt: RuntimeClient | None = None

    def _switch_depths(self) -> dict[int, int]:
        if self._rt is None:
            self._rt = RuntimeClient(self.thrift_port, timeout=2.0).connect()
        try:
            cells = self._rt.read_register_all(REG_QUEUE_DEPTH)
        except (RuntimeApiError, OSError):
            self._rt.close()
            self._rt = None
            raise
        base = self.port.port * NUM_PRIORITIES
        return {p: cells[base + p] for p in range(NUM_PRIORITIES) if base + p < len(cells)}

    def _run(self) -> None:
        t0 = time.monotonic()
        while not self._stop.is_set():
            start = time.monotonic()
            try:
                text = tc.run_tc(
                    ["tc", "-s", "qdisc", "show", "dev", self.port.iface], ns=self.port.ns
                )
                shaper = tc.backlog_by_priority(text, self.port.mode)  # type: ignore[arg-type]
                switch = self._switch_depths()
            except (tc.TcError, RuntimeApiError, OSError, ValueError) as exc:
                if len(self.errors) < 5:  # a sample lost, not the run: say why, go on
                    self.errors.append(str(exc))
            else:
                self.t.append(start - t0)
                self.bottleneck.append(shaper)
                self.switch.append(switch)
            # a sampling period, not synchronisation: nothing waits on it
            self._stop.wait(max(0.0, INTERVAL_S - (time.monotonic() - start)))

    def __enter__(self) -> QueueSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        if self._rt is not None:
            self._rt.close()

    def as_json(self) -> dict[str, Any]:
        """Per priority ever non-zero, its depth at each sample time (packets)."""

        def series(rows: list[dict[int, int]]) -> dict[str, list[int]]:
            used = sorted({p for r in rows for p, n in r.items() if n})
            return {str(p): [r.get(p, 0) for r in rows] for p in used}

        p = self.port
        return {
            "port": f"{p.switch} port {p.port} -> {p.toward}",
            "t": [round(x, 3) for x in self.t],
            "bottleneck": series(self.bottleneck),
            "switch": series(self.switch),
            "errors": self.errors,
        }


def plot_queue_depths(results: dict[str, Any], path: Path) -> Any:
    """One row per policy, one column per shaped port: each priority's queue depth over
    the policy's run (solid: the bottleneck shaper; dotted: the switch's own egress
    queue, from its registers), one colour per priority in every panel, 7 (served
    first) darkest. Returns the (closed) matplotlib figure, for inspection."""
    import matplotlib.pyplot as plt

    from sim.eval.figures import save_figure  # (importing it selects the Agg backend)

    pols = [p for p, r in results["policies"].items() if r.get("queue_depths")]
    ports = max((len(results["policies"][p]["queue_depths"]) for p in pols), default=0)
    rows, cols = max(1, len(pols)), max(1, ports)
    fig, grid = plt.subplots(
        rows, cols, figsize=(7.0 * cols, 2.6 * rows), squeeze=False, sharex="col"
    )
    colour = plt.get_cmap("viridis_r", NUM_PRIORITIES + 1)
    for r, pol in enumerate(pols):
        for c, view in enumerate(results["policies"][pol]["queue_depths"]):
            ax = grid[r][c]
            for prio in range(NUM_PRIORITIES - 1, -1, -1):
                key = str(prio)
                if key in view["bottleneck"]:
                    ax.plot(view["t"], view["bottleneck"][key], color=colour(prio + 1),
                            lw=1.2, label=f"priority {prio}")  # fmt: skip
                if key in view["switch"]:
                    ax.plot(view["t"], view["switch"][key], color=colour(prio + 1),
                            lw=1.0, ls=":")  # fmt: skip
            if not view["t"]:
                why = "; ".join(view.get("errors", [])[:1]) or "nothing sampled"
                ax.text(0.5, 0.5, f"no samples: {why}", ha="center", va="center", fontsize=8)
            ax.set_title(f"{pol}: {view['port']}", fontsize=9)
            ax.set_ylabel("packets queued")
            ax.grid(alpha=0.3)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=7, loc="upper right", ncol=2)
            if r == rows - 1:
                ax.set_xlabel("seconds since the policy's run started")
    if not pols:
        grid[0][0].text(0.5, 0.5, "no queue samples", ha="center", va="center")
    fig.suptitle(
        "Who waited where: each priority queue's depth at the bottleneck, per policy\n"
        "solid: the bottleneck port's queues (strict priority, 7 served first)\n"
        "dotted: the switch's own egress queue feeding it (P4 telemetry registers)",
        fontsize=10,
    )
    save_figure(fig, path)
    return fig
