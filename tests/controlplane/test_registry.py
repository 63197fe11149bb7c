"""Registry: ID allocation, persistence, transactions (SQLite file per test)."""

from __future__ import annotations

from pathlib import Path

import pytest

from controlplane.registry import (
    DuplicateJobError,
    IdsExhaustedError,
    Registry,
    RegistryError,
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
    assert (mode, sync) == ("wal", 1)  # 1 == NORMAL: kill -9 safe (test_faults_registry)
    full = Registry(tmp_path / "full.db", sync="full")
    assert full._db.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL: power-loss safe
    full.close()
    with pytest.raises(RegistryError):
        Registry(tmp_path / "x.db", sync="sometimes")
    reg2 = Registry(db)  # a second process would see the same
    assert [r.job_id for r in reg2.jobs()] == ["a"]
    assert reg2.job("a").spec == {"job": "a"}
    assert reg2.get_setting("policy", "echelon") == "coflow"
    reg.close()
    reg2.close()


def test_mirrored_ids_follow_another_connection(tmp_path: Path) -> None:
    """The lowest-free allocation keeps the used IDs in memory; a commit by another
    connection (another process on the file) is noticed at the next transaction."""
    one, two = Registry(tmp_path / "r.db"), Registry(tmp_path / "r.db")
    _add(one, "a", ["g"])
    _add(two, "b", ["g"])
    _add(one, "c", ["g"])  # a stale mirror would hand out b's IDs again
    ids = {r.job_id: r.groups[0].echelon_id for r in one.jobs()}
    assert ids == {"a": 1, "b": 2, "c": 3}
    one.begin()
    one.remove_job("a")
    one.commit()
    _add(one, "d", ["g"])  # lowest free again
    assert one.job("d").groups[0].echelon_id == 1
    one.close()
    two.close()


def test_allocation_is_always_the_lowest_free_ids(tmp_path: Path) -> None:
    """Random adds and removes (and rolled-back adds): every allocation is exactly the
    lowest IDs no registered group holds, as a scan from the bottom would give."""
    import random

    rng = random.Random(5)
    reg = Registry(tmp_path / "r.db", class_slots=200)
    live: set[str] = set()
    for step in range(300):
        if live and rng.random() < 0.45:
            victim = rng.choice(sorted(live))
            reg.begin()
            reg.remove_job(victim)
            reg.commit()
            live.discard(victim)
            continue
        held = {(g.echelon_id, g.class_id) for r in reg.jobs() for g in r.groups}
        n = rng.randint(1, 3)
        if len(held) + n > 200:
            continue
        name = f"j{step}"
        reg.begin()
        rec = reg.add_job(name, {"job": name}, [f"g{i}" for i in range(n)])
        if rng.random() < 0.1:
            reg.rollback()
            continue
        reg.commit()
        live.add(name)
        used_e = {e for e, _ in held}
        used_c = {c for _, c in held}
        want_e = [i for i in range(1, 1000) if i not in used_e][:n]
        want_c = [i for i in range(0, 200) if i not in used_c][:n]
        assert [g.echelon_id for g in rec.groups] == want_e, step
        assert [g.class_id for g in rec.groups] == want_c, step
