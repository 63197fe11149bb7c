"""Registry: ID allocation, persistence, transactions (SQLite file per test)."""

from __future__ import annotations

from pathlib import Path

import pytest

from controlplane.registry import (
    DuplicateJobError,
    IdsExhaustedError,
    Registry,
    UnknownJobError,
)


def _add(reg: Registry, job: str, groups: list[str]) -> None:
    reg.begin()
    try:
        reg.add_job(job, {"job": job}, groups)
    except BaseException:
        reg.rollback()
        raise
    reg.commit()


def test_lowest_free_ids_and_reuse(tmp_path: Path) -> None:
    reg = Registry(tmp_path / "r.db")
    _add(reg, "a", ["g1", "g2"])
    _add(reg, "b", ["g1"])
    ids = {(r.job_id, g.group): (g.echelon_id, g.class_id) for r in reg.jobs() for g in r.groups}
    assert ids == {("a", "g1"): (1, 0), ("a", "g2"): (2, 1), ("b", "g1"): (3, 2)}
    reg.begin()
    reg.remove_job("a")
    reg.commit()
    _add(reg, "c", ["x"])
    assert [(g.echelon_id, g.class_id) for g in reg.job("c").groups] == [(1, 0)]
    assert [r.job_id for r in reg.jobs()] == ["b", "c"]


def test_duplicate_unknown_and_exhaustion(tmp_path: Path) -> None:
    reg = Registry(tmp_path / "r.db", class_slots=3)
    _add(reg, "a", ["g1", "g2"])
    with pytest.raises(DuplicateJobError) as ei:
        _add(reg, "a", ["g"])
    assert ei.value.field == "job"
    with pytest.raises(IdsExhaustedError) as ei2:
        _add(reg, "b", ["g1", "g2"])
    assert ei2.value.field == "class_id"
    assert [r.job_id for r in reg.jobs()] == ["a"]  # rolled back whole
    with pytest.raises(UnknownJobError):
        reg.job("zz")
    reg.begin()
    with pytest.raises(UnknownJobError):
        reg.remove_job("zz")
    reg.rollback()


def test_persistent_and_wal(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    reg = Registry(db)
    _add(reg, "a", ["g"])
    reg.begin()
    reg.set_setting("policy", "coflow")
    reg.commit()
    reg.begin()
    reg.add_job("uncommitted", {}, ["g"])
    reg.rollback()
    mode = reg._db.execute("PRAGMA journal_mode").fetchone()[0]
    sync = reg._db.execute("PRAGMA synchronous").fetchone()[0]
    assert (mode, sync) == ("wal", 2)  # 2 == FULL
    reg2 = Registry(db)  # a second process would see the same
    assert [r.job_id for r in reg2.jobs()] == ["a"]
    assert reg2.job("a").spec == {"job": "a"}
    assert reg2.get_setting("policy", "echelon") == "coflow"
    reg.close()
    reg2.close()
