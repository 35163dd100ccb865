"""The cached, migrated PGlite database a fresh ``pglite://`` store starts from."""

from __future__ import annotations

import fcntl
import json
import os
import uuid

import pytest

import alkstore
from alkstore.cli import main
from alkstore.engines.pglite.bridge import BridgeError, start_bridge
from alkstore.engines.pglite.template import Template


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A template dumped from a freshly migrated bridge (one initdb for the module)."""
    template = Template(tmp_path_factory.mktemp("tpl") / "db.tar")
    with start_bridge(None, timeout=300) as bridge:
        alkstore.connect(bridge.dsn, engine="pglite", schema="tpl").close()
        assert template.save_from(bridge) is True
    return template


def test_a_dump_is_written_once_and_whole(saved):
    assert saved.exists()
    assert saved.path.stat().st_size > 1_000_000
    assert [p.name for p in saved.path.parent.iterdir() if ".tmp-" in p.name] == []
    with start_bridge(None, load_data_dir=saved.path, timeout=300) as bridge:
        assert saved.save_from(bridge) is False  # already there


@pytest.mark.parametrize("where", ["memory", "directory"])
def test_a_fresh_database_starts_as_the_migrated_copy(saved, tmp_path, where):
    data_dir = None if where == "memory" else tmp_path / "db"
    with start_bridge(data_dir, load_data_dir=saved.path, timeout=300) as bridge:
        assert bridge.info["loaded_data_dir"] is True
        # The schema is there: no migration needed, and it works.
        with alkstore.connect(bridge.dsn, engine="pglite", schema="tpl", migrate=False) as s:
            s.create_queue("q")
            job_id = s.send("q", {"n": 1})
            assert s.get_job("q", job_id).data == {"n": 1}
    if data_dir is not None:  # reopened, the copy is not loaded over the database
        with start_bridge(data_dir, load_data_dir=saved.path, timeout=300) as bridge:
            assert bridge.info["loaded_data_dir"] is False
            with alkstore.connect(bridge.dsn, engine="pglite", schema="tpl") as s:
                assert s.get_job("q", job_id).data == {"n": 1}


def test_a_process_that_finds_the_dump_lock_taken_skips_dumping(saved, tmp_path):
    template = Template(tmp_path / "db.tar")
    fd = os.open(tmp_path / ".dump.lock", os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with start_bridge(None, load_data_dir=saved.path, timeout=300) as bridge:
            assert template.save_from(bridge) is False
    finally:
        os.close(fd)
    assert not template.exists()


def test_a_failed_dump_says_why_and_leaves_nothing(saved, tmp_path):
    target = tmp_path / "missing-dir" / "db.tar"
    with start_bridge(None, load_data_dir=saved.path, timeout=300) as bridge:
        with pytest.raises(BridgeError, match="could not dump"):
            bridge.dump_data_dir(target)
        assert bridge.is_running()
    assert not target.parent.exists()


def test_the_template_is_keyed_by_schema_and_options():
    a = Template.for_schema("alkstore", {})
    assert Template.for_schema("alkstore", {}) == a
    assert Template.for_schema(f"s_{uuid.uuid4().hex[:8]}", {}) != a
    assert Template.for_schema("alkstore", {"distributed": True}) != a


def test_a_schema_template_is_dumped_from_its_second_fresh_start(tmp_path):
    template = Template(tmp_path / "db-x.tar")
    assert template.first_use() is True
    assert template.first_use() is False
    assert not template.exists()  # noting a use writes no database


def test_a_store_on_a_new_schema_starts_from_the_base_and_migrates(saved):
    schema = f"s_{uuid.uuid4().hex[:8]}"
    with alkstore.connect("pglite://", schema=schema) as store:
        store.create_queue("q")
        assert store.fetch("q") == []
    assert Template.base().exists()
    assert not Template.for_schema(schema, {}).exists()  # used once: not dumped


def test_bench_pglite_start_times_each_kind(tmp_path):
    path = tmp_path / "start.json"
    assert main(["bench", "pglite-start", "--runs", "1", "--no-uncached", "--json", str(path)]) == 0
    rows = json.loads(path.read_text())["results"]
    assert [r["start"] for r in rows] == ["fresh (in memory)", "reopened (data directory)"]
    assert all(r["runs"] == 1 and r["median_s"] > 0 for r in rows)
    assert main(["bench", "pglite-start", "--runs", "0"]) == 2


def test_bench_pglite_start_times_the_start_and_not_the_close(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from alkstore.bench import pglite_start

    clock = [0.0]
    closed = []
    monkeypatch.setattr(pglite_start.time, "perf_counter", lambda: clock[0])

    def start() -> object:
        clock[0] += 1.0  # the start takes one tick of the fake clock

        def close() -> None:
            clock[0] += 100.0  # closing takes a hundred
            closed.append(True)

        return close

    seconds, _load = pglite_start._timed(start)  # type: ignore[arg-type]
    assert seconds == 1.0
    assert closed == [True]
