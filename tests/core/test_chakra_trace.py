"""Reading Chakra traces: round trips of every node type, every bad input as a one-line
error naming file, node and field, and the shipped traces."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import pytest

from echelon.chakra.trace import NodeType, TraceError, decode, read_trace
from sim.eval.chakra import TRACE
from tests.core.chakra_traces import COLL, COMP, RECV, SEND, encode, node, write

DDP = TRACE
SHIPPED = DDP.parent
needs_traces = pytest.mark.skipif(not DDP.exists(), reason="shared Chakra traces not present")


def test_every_node_type_round_trips(tmp_path: Path) -> None:
    nodes = [
        node(0, COMP, dur=12, is_cpu_op=False),
        node(1, COMP, (0,), dur=3, is_cpu_op=True, ctrl=(99,)),
        node(2, SEND, (1,), comm_dst=1, comm_tag=7, comm_size=4096),
        node(3, RECV, (2,), comm_src=1, comm_tag=7, comm_size=4096),
        node(4, COLL, (3, 0), comm_type=0, comm_size=1 << 20, pg_name="dp"),
        node(5, 2, (4,)),  # MEM_LOAD
        node(6, 3, (5,)),  # MEM_STORE
        node(7, 1, ()),  # METADATA
    ]
    rt = read_trace(write(tmp_path / "t.3.et", nodes, schema="1.0.1"))
    r = rt.ranks[0]
    assert r.rank == 0 and r.metadata == {"schema": "1.0.1"} and r.version == "0.0.4"
    types = [n.type for n in r.nodes]
    assert types == [NodeType(t) for t in (COMP, COMP, SEND, RECV, COLL, 2, 3, 1)]
    a, b, send, recv, coll = r.nodes[:5]
    assert (a.duration_us, a.is_cpu_op, b.is_cpu_op, b.ctrl_deps) == (12, False, True, (99,))
    assert (send.comm_dst, send.comm_tag, send.comm_size, send.data_deps) == (1, 7, 4096, (1,))
    assert (recv.comm_src, recv.comm_tag) == (1, 7)
    assert (coll.comm_type, coll.comm_size, coll.attrs["pg_name"], coll.data_deps) == (
        0, 1 << 20, "dp", (3, 0))  # fmt: skip


def test_a_rank_directory_is_read_in_rank_order(tmp_path: Path) -> None:
    for r in (1, 0, 2):
        write(tmp_path / f"x.{r}.et", [node(r, COMP, dur=r)])
    trace = read_trace(tmp_path)
    assert [(rt.rank, rt.nodes[0].id) for rt in trace.ranks] == [(0, 0), (1, 1), (2, 2)]


def _error(tmp_path: Path, data: bytes) -> str:
    p = tmp_path / "bad.et"
    p.write_bytes(data)
    with pytest.raises(TraceError) as exc:
        read_trace(p)
    text = str(exc.value)
    assert "\n" not in text
    return text


def test_truncated_stream_names_the_record(tmp_path: Path) -> None:
    data = encode([node(0, COMP), node(1, COMP, (0,), dur=5)])
    msg = _error(tmp_path, data[:-3])
    assert msg.startswith("bad.et: truncated: node record #2") and "needs" in msg
    assert "node record #3 (byte" in _error(tmp_path, data + b"\x80")


def test_unknown_node_type_names_node_and_field(tmp_path: Path) -> None:
    msg = _error(tmp_path, encode([node(0, COMP), node(17, 42)]))
    assert msg.startswith("bad.et: node 17.type: unknown node type 42")
    assert _error(tmp_path, encode([node(3, 0)])).startswith("bad.et: node 3.type")


def test_missing_dependency_names_node_and_field(tmp_path: Path) -> None:
    msg = _error(tmp_path, encode([node(0, COMP), node(5, COMP, (0, 9))]))
    assert msg == "bad.et: node 5.data_deps: depends on node 9, which the trace lacks"


def test_cycles_and_duplicates(tmp_path: Path) -> None:
    msg = _error(tmp_path, encode([node(0, COMP), node(1, COMP, (0, 3)), node(2, COMP, (1,)),
                                   node(3, COMP, (2,))]))  # fmt: skip
    assert msg.startswith("bad.et: node ") and "dependency cycle: " in msg
    assert msg.split("cycle: ")[1] in ("1 -> 3 -> 2 -> 1", "3 -> 2 -> 1 -> 3", "2 -> 1 -> 3 -> 2")
    assert "depends on itself" in _error(tmp_path, encode([node(4, COMP, (4,))]))
    assert _error(tmp_path, encode([node(4, COMP), node(4, COMP)])).startswith(
        "bad.et: node 4.id: appears twice"
    )


def test_malformed_and_empty(tmp_path: Path) -> None:
    assert "empty" in _error(tmp_path, b"")
    body = bytes([0x0B])  # wire type 3 inside a node
    msg = _error(tmp_path, encode([]) + bytes([len(body)]) + body)
    assert msg.startswith("bad.et: node record #1: malformed at byte")


def test_control_deps_on_absent_nodes_are_kept_not_followed(tmp_path: Path) -> None:
    r = read_trace(write(tmp_path / "t.et", [node(0, COMP, ctrl=(0, 77))])).ranks[0]
    assert r.nodes[0].ctrl_deps == (0, 77)


def test_directory_errors(tmp_path: Path) -> None:
    write(tmp_path / "x.0.et", [node(0, COMP)])
    write(tmp_path / "x.2.et", [node(0, COMP)])
    with pytest.raises(TraceError, match=r"missing \[1\]"):
        read_trace(tmp_path)
    (tmp_path / "x.2.et").rename(tmp_path / "y.et")
    with pytest.raises(TraceError, match=r"y\.et: a rank file must be named"):
        read_trace(tmp_path)
    with pytest.raises(TraceError, match="cannot read"):
        read_trace(tmp_path / "none.et")


@needs_traces
def test_shipped_traces_node_counts() -> None:
    ddp = read_trace(DDP).ranks[0]
    assert len(ddp.nodes) == 3664
    kinds = [(n.type, n.is_cpu_op) for n in ddp.nodes]
    assert kinds.count((NodeType.COMP, False)) + kinds.count((NodeType.COMM_COLL, False)) == 1216
    assert sum(n.type is NodeType.COMM_COLL for n in ddp.nodes) == 21
    sizes = [n.comm_size for n in ddp.nodes if n.comm_size]
    assert sizes == [212480, 424, 8196000, 31502336, 26255360, 26550272, 9724160]
    ring = read_trace(SHIPPED / "astra-ring-allreduce-8npus")
    for r in ring.ranks:
        kinds2 = [n.type for n in r.nodes]
        assert (kinds2.count(NodeType.COMM_SEND), kinds2.count(NodeType.COMM_RECV),
                kinds2.count(NodeType.COMP)) == (14, 14, 7)  # fmt: skip
    coll = read_trace(SHIPPED / "astra-all-reduce-8npus")
    assert [len(r.nodes) for r in coll.ranks] == [1] * 8
    assert all(r.nodes[0].comm_size == 1 << 20 for r in coll.ranks)


@needs_traces
@pytest.mark.slow
def test_reading_the_ddp_trace_takes_under_a_second() -> None:
    data = DDP.read_bytes()
    times = []
    for _ in range(3):
        t = time.perf_counter()
        decode(data, str(DDP))
        times.append(time.perf_counter() - t)
    assert statistics.median(times) < 1.0
