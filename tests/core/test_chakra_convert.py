"""Trace -> dag job: the device stream, consumers, groups, SPMD and multi-rank traces,
byte totals against hand-computed values, and the errors of point-to-point matching."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from echelon.chakra.convert import job_from_path
from echelon.chakra.trace import TraceError
from echelon.cli import main
from echelon.jobs import load_job, load_job_file
from tests.core.chakra_traces import COLL, COMP, RECV, SEND, node, write
from tests.core.test_chakra_trace import DDP, SHIPPED, needs_traces

H4 = ["h1", "h2", "h3", "h4"]
H8 = [f"h{i}" for i in range(1, 9)]
MB = 1 << 20


def _bytes_per_pair(desc: dict[str, Any]) -> Counter[tuple[str, str]]:
    out: Counter[tuple[str, str]] = Counter()
    for ef in load_job(desc).plan().echelons:
        for f in ef.flows:
            out[(f.src, f.dst)] += f.size
    return out


def _ddp_like(tmp_path: Path) -> Path:
    """A tiny DDP step: forward, two backward kernels each filling a bucket, two bucket
    all-reduces (launched by zero-size c10d calls), then copy-backs reading each bucket."""
    n = [
        node(1, COMP, dur=0, is_cpu_op=True, name="aten::linear"),
        node(2, COMP, (1,), dur=10, is_cpu_op=False, name="fwd kernel"),
        node(3, COMP, (1,), dur=0, is_cpu_op=True, name="aten::mul(0)"),  # bucket 0 data
        node(4, COMP, (3,), dur=20, is_cpu_op=False, name="bwd kernel 1"),
        node(5, COLL, (3,), is_cpu_op=True, name="c10d::allreduce_(0)"),
        node(6, COLL, (5, 3), comm_type=0, comm_size=4000, is_cpu_op=False),
        node(7, COMP, (5,), dur=0, is_cpu_op=True, name="aten::mul(0)"),  # bucket 1 data
        node(8, COMP, (7,), dur=30, is_cpu_op=False, name="bwd kernel 2"),
        node(9, COLL, (7,), is_cpu_op=True, name="c10d::allreduce_(0)"),
        node(10, COLL, (9, 7), comm_type=0, comm_size=8000, is_cpu_op=False),
        node(11, COMP, (9, 3), dur=0, is_cpu_op=True, name="aten::copy_ bucket 0"),
        node(12, COMP, (11,), dur=5, is_cpu_op=False, name="memcpy 0"),
        node(13, COMP, (11, 7), dur=0, is_cpu_op=True, name="aten::copy_ bucket 1"),
        node(14, COMP, (13,), dur=6, is_cpu_op=False, name="memcpy 1"),
    ]
    return write(tmp_path / "ddp.et", n)


def test_buckets_consumed_by_the_copy_back_form_one_staggered_echelon(tmp_path: Path) -> None:
    desc = job_from_path(_ddp_like(tmp_path), H4)
    assert desc["ranks"] == 1
    assert [s["compute_s"] for s in desc["steps"]] == [30e-6, 30e-6, 5e-6, 6e-6]
    comms = desc["comms"]
    assert [(c["op"], c["size_bytes"], c["after"], c["before"]) for c in comms] == [
        ("all_reduce", 4000, [0], [2]),
        ("all_reduce", 8000, [1], [3]),
    ]
    assert comms[0]["group"] == comms[1]["group"]  # consumed by one computation
    spec = load_job(desc)
    (ef,) = spec.plan().echelons
    assert ef.t_ref == pytest.approx(60e-6)  # the end of backward: 10 + 20 + 30 µs
    # bucket 0's flows are needed first, bucket 1's after the 5 µs copy of bucket 0
    assert sorted({round(f.offset * 1e6, 3) for f in ef.flows}) == [0.0, 5.0]
    assert spec.ideal_iteration_s == pytest.approx(71e-6)
    # ring all-reduce on 4 hosts: every host sends 2(N-1)/N of each bucket to its neighbour
    per_pair = _bytes_per_pair(desc)
    assert per_pair == {
        (a, b): 2 * 3 * (1000 + 2000) for a, b in zip(H4, H4[1:] + H4[:1], strict=True)
    }


def test_traffic_nobody_waits_for_is_its_own_group(tmp_path: Path) -> None:
    p = write(tmp_path / "t.et", [node(0, COMP, dur=4), node(1, COLL, (0,), comm_type=6,
                                                           comm_size=400)])  # fmt: skip
    desc = job_from_path(p, H4)
    (c,) = desc["comms"]
    assert c["group"].endswith("-unwaited") and c["op"] == "all_to_all"
    # direct all-to-all: each ordered pair ⌈400/4⌉ bytes
    assert _bytes_per_pair(desc) == {(a, b): 100 for a in H4 for b in H4 if a != b}


def _ring_ranks(tmp_path: Path, n: int, size: int, drop_recv_on: int | None = None) -> Path:
    for r in range(n):
        nodes = [node(0, SEND, (), comm_dst=(r + 1) % n, comm_size=size)]
        if r != drop_recv_on:
            nodes.append(node(1, RECV, (0,), comm_src=(r - 1) % n, comm_size=size))
            nodes.append(node(2, COMP, (1,), dur=3))
        write(tmp_path / f"ring.{r}.et", nodes)
    return tmp_path


def test_point_to_point_ops_match_by_src_dst_tag(tmp_path: Path) -> None:
    desc = job_from_path(_ring_ranks(tmp_path, 3, 500), H4[:3])
    assert desc["ranks"] == 3
    sends = desc["comms"]
    assert [(c["src"], c["dst"]) for c in sends] == [(0, 1), (1, 2), (2, 0)]
    # each send is waited for by the compute after the matching receive on its destination
    for c in sends:
        (step,) = c["before"]
        assert desc["steps"][step]["rank"] == c["dst"]
    assert _bytes_per_pair(desc) == {("h1", "h2"): 500, ("h2", "h3"): 500, ("h3", "h1"): 500}


def test_a_send_without_its_receive_names_file_node_and_field(tmp_path: Path) -> None:
    with pytest.raises(TraceError) as exc:
        job_from_path(_ring_ranks(tmp_path, 3, 500, drop_recv_on=2), H4[:3])
    assert str(exc.value) == (
        "ring.1.et: node 0.comm_dst: send to rank 2 (tag 0) has no matching receive in ring.2.et"
    )


def test_collectives_must_agree_across_ranks(tmp_path: Path) -> None:
    for r, size in enumerate((100, 100, 200)):
        write(tmp_path / f"c.{r}.et", [node(0, COLL, comm_type=0, comm_size=size)])
    with pytest.raises(TraceError, match=r"^c\.2\.et: node 0\.comm_size: is 200, but"):
        job_from_path(tmp_path, H4[:3])
    with pytest.raises(Exception, match="3 ranks: give as many hosts"):
        job_from_path(tmp_path, H4)


def test_unknown_collective_type(tmp_path: Path) -> None:
    p = write(tmp_path / "u.et", [node(4, COLL, comm_type=42, comm_size=8)])
    with pytest.raises(TraceError, match=r"^u\.et: node 4\.comm_type: unknown collective type 42"):
        job_from_path(p, H4)


@needs_traces
def test_ddp_trace_groups_and_bytes() -> None:
    desc = job_from_path(DDP, H4)
    load_job(desc)
    groups = Counter(c["group"] for c in desc["comms"])
    assert groups == {"broadcast/0": 2, "allreduce/1": 5}
    by_size = {c["size_bytes"]: c for c in desc["comms"]}
    plan = load_job(desc).plan()
    ar = next(ef for ef in plan.echelons if ef.group == "allreduce/1")
    sizes = (8196000, 31502336, 26255360, 26550272, 9724160)
    # 4-host ring: 2(N-1) = 6 steps of ⌈S/4⌉ from each host, per bucket
    assert ar.total_bytes == sum(6 * 4 * -(-s // 4) for s in sizes)
    assert len({f.offset for f in ar.flows}) == 5  # staggered by the copy-back, bucket order
    assert by_size[8196000]["before"] < by_size[31502336]["before"]
    assert ar.t_ref == pytest.approx(0.287527, abs=1e-6)
    bc = next(ef for ef in plan.echelons if ef.group == "broadcast/0")
    assert bc.total_bytes == 3 * (212480 + 424)  # chain from rank 0: N-1 hops of S


@needs_traces
def test_astra_traces_move_two_n_minus_one_over_n_per_rank() -> None:
    expect = 2 * 7 * (MB // 8)  # 2(N-1)/N x 1 MB per rank, N = 8
    for name in ("astra-ring-allreduce-8npus", "astra-all-reduce-8npus"):
        per_pair = _bytes_per_pair(job_from_path(SHIPPED / name, H8))
        assert per_pair == {(a, b): expect for a, b in zip(H8, H8[1:] + H8[:1], strict=True)}, name


@needs_traces
def test_echelon_job_chakra_writes_a_job_file_show_accepts(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "ddp.yaml"
    assert main(["job", "--chakra", str(DDP), "--hosts", ",".join(H4), "-o", str(out)]) == 0
    assert load_job_file(out).paradigm == "dag"
    assert main(["show", str(out)]) == 0
    text = capsys.readouterr().out
    assert "pytorch-ddp-rank0/0/allreduce/1" in text and "ideal iteration 292.828 ms" in text
    assert main(["job", "--chakra", str(tmp_path / "none.et"), "--hosts", "h1,h2"]) == 2
    assert "none.et: cannot read" in capsys.readouterr().err


def test_group_by_op_makes_one_coflow_per_operation(tmp_path: Path) -> None:
    desc = job_from_path(_ddp_like(tmp_path), H4, group_by="op")
    assert [c["group"] for c in desc["comms"]] == ["allreduce/0", "allreduce/1"]
    efs = load_job(desc).plan().echelons
    assert len(efs) == 2 and all(ef.is_coflow for ef in efs)
    assert _bytes_per_pair(desc) == _bytes_per_pair(job_from_path(tmp_path / "ddp.et", H4))
    with pytest.raises(Exception, match="--group-by: must be one of"):
        job_from_path(tmp_path / "ddp.et", H4, group_by="bucket")
