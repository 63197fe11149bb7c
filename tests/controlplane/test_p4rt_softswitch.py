"""The P4Runtime client against the real soft switch process (real gRPC)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from p4client.p4info import P4Info
from p4client.p4rt import P4RuntimeWriteError, SwitchConnection
from tests.controlplane.helpers import P4INFO
from tests.controlplane.procs import free_port, start_softswitch

BMV2_JSON = P4INFO.with_name("echelon.json")

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def addr(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    proc = start_softswitch(port, Path(tmp_path_factory.mktemp("ss")) / "ss.log")
    try:
        yield f"127.0.0.1:{port}"
    finally:
        proc.stop()


def test_pipeline_entries_errors_counters(addr: str) -> None:
    with SwitchConnection(addr, election_id=(0, 7)) as sw:
        assert sw.is_primary and sw.is_alive
        cookie = sw.set_pipeline(P4INFO, BMV2_JSON.read_bytes())
        assert sw.get_pipeline_cookie() == cookie
        info = sw.get_pipeline_p4info()
        assert info is not None and info.table("deadline_prio").size == 8192
        route = sw.table_entry(
            "ipv4_lpm",
            {"hdr.ipv4.dstAddr": ("10.0.0.1", 32)},
            "ipv4_forward",
            {"dstAddr": "00:00:0a:00:00:01", "port": 1},
        )
        rng = sw.table_entry(
            "deadline_prio",
            {"meta.class_id": 0, "hdr.echelon.deadline_us": (0, 999)},
            "set_deadline_prio",
            {"prio": 5},
            priority=1,
        )
        cls = sw.table_entry(
            "echelon_classify",
            {"hdr.ipv4.srcAddr": "10.0.0.2", "hdr.echelon.echelon_id": 0},
            "set_echelon",
            {"class_id": 0, "prio": 7},
        )
        sw.insert([route, rng, cls])
        assert set(sw.read_table_entries()) == {route, rng, cls}
        assert sw.read_table_entries("echelon_ids") == []
        moved = sw.table_entry(
            "ipv4_lpm",
            {"hdr.ipv4.dstAddr": ("10.0.0.1", 32)},
            "ipv4_forward",
            {"dstAddr": "00:00:0a:00:00:01", "port": 2},
        )
        sw.modify([moved])
        assert moved in sw.read_table_entries("ipv4_lpm")
        with pytest.raises(P4RuntimeWriteError) as ei:
            sw.insert(
                [route, sw.table_entry("echelon_ids", {"hdr.echelon.echelon_id": 4}, "NoAction")]
            )
        assert [s.code for s in ei.value.statuses] == ["ALREADY_EXISTS", "OK"]
        with pytest.raises(P4RuntimeWriteError) as ei:
            sw.delete([sw.table_entry("echelon_ids", {"hdr.echelon.echelon_id": 5}, "NoAction")])
        assert ei.value.failed[0].code == "NOT_FOUND"
        sw.delete([moved, rng, cls])
        counters = sw.read_counter("EchelonIngress.echelon_pkts")
        assert len(counters) == 1024 and set(counters.values()) == {(0, 0)}
        sw.reset_counter("unprioritized_pkts")
        assert sw.read_counter("unprioritized_pkts", 2) == {2: (0, 0)}


def test_backup_client_reads_but_cannot_write(addr: str) -> None:
    info = P4Info.load(P4INFO)
    with SwitchConnection(addr, election_id=(0, 9)) as primary:
        primary.set_pipeline(info, BMV2_JSON.read_bytes())
        with SwitchConnection(addr, election_id=(0, 3), p4info=info) as backup:
            assert primary.is_primary and not backup.is_primary
            e = backup.table_entry("echelon_ids", {"hdr.echelon.echelon_id": 9}, "NoAction")
            with pytest.raises(P4RuntimeWriteError) as ei:
                backup.insert([e])
            assert ei.value.code == "PERMISSION_DENIED"
            primary.insert([e])
            assert e in backup.read_table_entries("echelon_ids")
            primary.delete([e])
