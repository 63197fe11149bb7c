"""The differential rig's own invariants (no switch needed): a sentinel must not be
given a priority above a frame it follows, and load_balance's frames must not reach the
hash without a whole TCP header (the value BMv2 hashes then is an earlier packet's;
``lb_frames`` rejects what :func:`_hashed_without_tcp` recognises)."""

from __future__ import annotations

import struct

from p4client.p4info import P4Info
from p4client.p4rt import SwitchConnection
from tests.p4.differential.programs import L3ACL, L3ACL_SENTINEL_PORT, _l3acl_entries, ipv4
from tests.p4.differential.public import _hashed_without_tcp

ETH = bytes(12) + b"\x08\x00"


def test_no_l3acl_entry_reprioritises_a_sentinel() -> None:
    sw = SwitchConnection("127.0.0.1:1", p4info=P4Info.load(L3ACL.p4info))  # never connects
    ranges = [
        e.match_dict()["meta.l4_dport"]
        for e in _l3acl_entries(sw)
        if e.table == "Ing.acl" and e.action == "Ing.set_prio"
        and "meta.l4_dport" in e.match_dict()
    ]  # fmt: skip
    assert ranges, "the ACL has set_prio entries on l4_dport ranges"
    assert all(not lo <= L3ACL_SENTINEL_PORT <= hi for lo, hi in ranges), ranges
    assert any(lo <= 9 <= hi for lo, hi in ranges)  # the old sentinel port did match


def test_a_frame_cut_into_the_ecmp_prefix_is_recognised() -> None:
    udp = ETH + ipv4("10.0.1.1", "10.0.2.201", 17, 8) + bytes(8)
    cut = (udp[:32]).ljust(64, b"\0")  # dst 10.0.2.201 cut after "10.0": reads 10.0.0.0
    assert _hashed_without_tcp(cut)
    tcp = struct.pack("!HHIIBBHHH", 1, 80, 0, 0, 0x50, 0, 0, 0, 0)
    whole = ETH + ipv4("10.0.1.1", "10.0.0.1", 6, len(tcp)) + tcp
    assert not _hashed_without_tcp(whole)
    assert not _hashed_without_tcp(ETH + ipv4("10.0.1.1", "10.0.7.1", 17, 8) + bytes(8))
