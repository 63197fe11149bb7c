"""Digests: when a sample is sent, batched, filtered and sent again.

The samples themselves are compared with BMv2's by the differential test
(tests/p4/programs/digest.p4); these are the delivery rules around them.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from finsy.proto import p4r

from p4client.p4info import P4Info
from softswitch.bm.pipeline import Pipeline
from softswitch.errors import AlreadyExists, InvalidArgument, NotFound

BUILD = Path(__file__).resolve().parents[1] / "p4" / "programs" / "build"


def _setup(max_list_size: int = 1) -> tuple[Pipeline, list[p4r.StreamMessageResponse], int]:
    info = P4Info.load(BUILD / "digest.p4info.txtpb").proto
    pl = Pipeline(info, (BUILD / "digest.json").read_bytes(), 1)
    sent: list[p4r.StreamMessageResponse] = []
    pl.digests.sink = sent.append
    did = next(d.preamble.id for d in info.digests if d.preamble.name == "mac_learn_t")
    de = p4r.DigestEntry(digest_id=did)
    de.config.max_list_size, de.config.max_timeout_ns = max_list_size, 10**12
    pl.digests.configure(p4r.Update.INSERT, de)
    return pl, sent, did


def _learn(pl: Pipeline, *values: int) -> None:
    list_id = next(i for i, ll in pl.digests.lists.items() if ll.name == "mac_learn_t")
    v = [0] * (max(pl.digests.lists[list_id].slots) + 1)
    for slot, value in zip(pl.digests.lists[list_id].slots, values, strict=True):
        v[slot] = value
    pl.digests.learn(list_id, v)


def _sample(d: p4r.P4Data) -> tuple[int, ...]:
    return tuple(int.from_bytes(m.bitstring, "big") for m in d.struct.members)


def _samples(msgs: list[p4r.StreamMessageResponse]) -> list[list[tuple[int, ...]]]:
    return [[_sample(d) for d in msg.digest.data] for msg in msgs]


def test_a_sample_is_sent_once_until_acknowledged() -> None:
    pl, sent, did = _setup()
    _learn(pl, 0xAA, 3, 1)
    _learn(pl, 0xAA, 3, 1)
    assert _samples(sent) == [[(0xAA, 3, 1)]]
    pl.digests.ack(did, sent[0].digest.list_id)
    _learn(pl, 0xAA, 3, 1)
    assert _samples(sent) == [[(0xAA, 3, 1)], [(0xAA, 3, 1)]]
    assert sent[0].digest.digest_id == did and sent[1].digest.list_id > sent[0].digest.list_id


def test_samples_wait_for_max_list_size() -> None:
    pl, sent, _did = _setup(max_list_size=3)
    _learn(pl, 1, 1, 0)
    _learn(pl, 2, 1, 0)
    assert sent == []
    _learn(pl, 3, 1, 0)
    assert _samples(sent) == [[(1, 1, 0), (2, 1, 0), (3, 1, 0)]]


def test_nothing_is_sent_for_a_digest_without_entry_or_after_its_delete() -> None:
    pl, sent, did = _setup()
    pl.digests.configure(p4r.Update.DELETE, p4r.DigestEntry(digest_id=did))
    _learn(pl, 0xAA, 3, 1)
    assert sent == []


def test_digest_entry_errors_name_the_digest() -> None:
    pl, _sent, did = _setup()
    with pytest.raises(AlreadyExists, match="mac_learn_t"):
        pl.digests.configure(p4r.Update.INSERT, p4r.DigestEntry(digest_id=did))
    other = next(i for i in pl.digests.by_digest if i != did)
    with pytest.raises(NotFound, match="flow_t"):
        pl.digests.configure(p4r.Update.MODIFY, p4r.DigestEntry(digest_id=other))
    with pytest.raises(InvalidArgument, match="digest_id"):
        pl.digests.configure(p4r.Update.INSERT, p4r.DigestEntry(digest_id=7))
