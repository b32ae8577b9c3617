"""An in-process stand-in for the Label Studio SDK client, for pull tests that need no server.

Only what ``pull`` calls: ``projects.exports.download_sync`` (returns the export bytes the test
set), ``projects.get`` (``maximum_annotations``), ``tasks.update`` (recorded: the overlaps a
pull sets) and ``users.list``. The integration tests run the same code against a real server.
"""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from annotation.client import Connection


class FakeClient:
    def __init__(self, users: dict[int, str]):
        self.export: bytes = b"[]"
        self.by_project: dict[int, bytes] = {}  # per-project exports (else ``export``)
        self.exported: list[tuple[int, bool]] = []
        self.maximum: dict[int, int] = {}  # maximum_annotations per project (default 3)
        self.updates: list[tuple[int, dict[str, Any]]] = []  # tasks.update calls
        self.projects = SimpleNamespace(
            exports=SimpleNamespace(download_sync=self._download),
            get=lambda pid: SimpleNamespace(id=pid, maximum_annotations=self.maximum.get(pid, 3)))
        self.tasks = SimpleNamespace(
            update=lambda tid, **kw: self.updates.append((int(tid), kw)),
            list=lambda **kw: [])  # no overlaps known: the recorded ones are used
        self.users = SimpleNamespace(list=lambda: [
            SimpleNamespace(id=i, email=e, username=e.split("@")[0]) for i, e in users.items()])

    def _download(self, pid: int, export_type: str, download_all_tasks: bool) -> list[bytes]:
        assert export_type == "JSON"
        self.exported.append((pid, download_all_tasks))
        blob = self.by_project.get(pid, self.export)
        return [blob[:7], blob[7:]]  # the SDK streams chunks

    def set_tasks(self, tasks: list[dict[str, Any]], pid: int | None = None) -> None:
        blob = json.dumps(tasks).encode()
        if pid is None:
            self.export = blob
        else:
            self.by_project[pid] = blob


def fake_connection(users: dict[int, str]) -> tuple[Connection, FakeClient]:
    client = FakeClient(users)
    return Connection(client=client, server="http://127.0.0.1:9", user_email="admin@example.com"), client


def record_pushed(cat, key: str, pid: int, drafts, first_task_id: int) -> dict[str, int]:
    """Record ``drafts`` as pushed to project ``pid`` (what push does after importing):
    ``{task key: task id}``."""
    from annotation.projects import record_project, record_tasks

    with cat.tx() as con:
        record_project(con, key, "http://127.0.0.1:9", pid, f"test {key}", "v", "sha",
                       created_at="2026-01-01")
    tasks = [{"id": first_task_id + i, "data": d.data, "meta": {"task_key": d.key}}
             for i, d in enumerate(drafts)]
    record_tasks(cat, key, "http://127.0.0.1:9", pid, tasks)
    return {d.key: first_task_id + i for i, d in enumerate(drafts)}
