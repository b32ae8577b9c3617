"""A fake Hugging Face Hub on 127.0.0.1: the endpoints ``huggingface_hub`` calls to create a
dataset repo, list its files and commit to it, answered the way the Hub answers them.

``with FakeHub() as hub: HfApi(endpoint=hub.url, token=...)``; ``hub.files(repo_id)`` is the
repo's content (path -> bytes) at ``main``, ``hub.commits(repo_id)`` its commit log (each with
the operations it carried). Every file is offered ``regular`` at preupload, so the client sends
the bytes inline in the commit (no LFS or Xet server needed). A request without the expected
``Authorization: Bearer <token>`` is refused (401), as the Hub refuses an unknown token.

Endpoints: ``POST /api/repos/create``, ``POST /api/validate-yaml`` (the README front matter
must parse as a YAML mapping), ``GET /api/datasets/{repo}/tree/{rev}[/{path}]``,
``GET /datasets/{repo}/resolve/{rev}/{path}`` (a file's bytes),
``POST /api/datasets/{repo}/preupload/{rev}``, ``POST /api/datasets/{repo}/commit/{rev}``
(NDJSON: ``header``, ``file``, ``deletedFile``, ``deletedFolder``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import unquote, urlsplit

import yaml

from tests.fakes.loopback import LoopbackServer

RESOLVE = re.compile(r"^/datasets/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$")
REPO_PATH = re.compile(r"^/api/datasets/([^/]+/[^/]+)/(tree|preupload|commit)/([^/]+)(/.*)?$")


@dataclass
class Repo:
    private: bool = False
    files: dict[str, bytes] = field(default_factory=dict)
    commits: list[dict[str, Any]] = field(default_factory=list)


class FakeHub(LoopbackServer):
    """``with FakeHub(token) as hub: ...``; ``hub.url`` is the endpoint."""

    def __init__(self, token: str = "hf_fake_write_token"):
        self.token = token
        self.repos: dict[str, Repo] = {}
        self.requests: list[tuple[str, str]] = []  # (method, path) in order
        self.lock = threading.Lock()
        self.url = ""

    def files(self, repo_id: str) -> dict[str, bytes]:
        with self.lock:
            return dict(self.repos[repo_id].files)

    def commits(self, repo_id: str) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.repos[repo_id].commits)

    def start(self) -> FakeHub:
        port = self.serve(type("Handler", (_Handler,), {"hub": self}), "fake-hub")
        self.url = f"http://127.0.0.1:{port}"
        return self


def _git_oid(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class _Handler(BaseHTTPRequestHandler):
    hub: FakeHub
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:  # quiet
        pass

    # -- plumbing -------------------------------------------------------------------------
    def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str, code: str | None = None) -> None:
        self._send(status, {"error": message}, {"X-Error-Code": code} if code else None)

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _authorized(self) -> bool:
        if self.headers.get("Authorization") == f"Bearer {self.hub.token}":
            return True
        self._error(401, "Invalid credentials in Authorization header")
        return False

    def _repo(self, repo_id: str, rev: str) -> Repo | None:
        repo = self.hub.repos.get(repo_id)
        if repo is None:
            self._error(404, "Repository not found", "RepoNotFound")
        elif rev != "main":
            self._error(404, f"Invalid rev id: {rev}", "RevisionNotFound")
            return None
        return repo

    # -- routes ---------------------------------------------------------------------------
    def _resolve(self, repo_id: str, rev: str, file: str) -> None:
        """``GET /datasets/{repo}/resolve/{rev}/{path}``: the file's bytes."""
        if not self._authorized():
            return None
        with self.hub.lock:
            repo = self._repo(repo_id, rev)
            if repo is None:
                return None
            data = repo.files.get(file)
        if data is None:
            return self._error(404, "Entry not found", "EntryNotFound")
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        return None

    def do_GET(self) -> None:  # noqa: N802 (http.server API)
        path = urlsplit(self.path).path
        self.hub.requests.append(("GET", path))
        r = RESOLVE.match(path)
        if r:
            return self._resolve(r.group(1), unquote(r.group(2)), unquote(r.group(3)))
        m = REPO_PATH.match(path)
        if not m or m.group(2) != "tree":
            return self._error(404, f"no route GET {path}")
        if not self._authorized():
            return None
        with self.hub.lock:
            repo = self._repo(m.group(1), unquote(m.group(3)))
            if repo is None:
                return None
            prefix = unquote((m.group(4) or "/")[1:])
            files = sorted(p for p in repo.files if p.startswith(prefix))
            folders = sorted({p.rsplit("/", 1)[0] for p in files if "/" in p})
            out = [{"type": "directory", "oid": "0" * 40, "path": d} for d in folders]
            out += [{"type": "file", "oid": _git_oid(repo.files[p]), "size": len(repo.files[p]),
                     "path": p} for p in files]
        return self._send(200, out)

    def do_POST(self) -> None:  # noqa: N802 (http.server API)
        path = urlsplit(self.path).path
        self.hub.requests.append(("POST", path))
        body = self._body()
        if not self._authorized():
            return None
        if path == "/api/repos/create":
            return self._create(json.loads(body))
        if path == "/api/validate-yaml":
            return self._validate_yaml(json.loads(body))
        m = REPO_PATH.match(path)
        if not m or m.group(2) == "tree":
            return self._error(404, f"no route POST {path}")
        with self.hub.lock:
            repo = self._repo(m.group(1), unquote(m.group(3)))
            if repo is None:
                return None
            if m.group(2) == "preupload":
                files = json.loads(body)["files"]
                return self._send(200, {"files": [
                    {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False,
                     "oid": None} for f in files]})
            return self._commit(m.group(1), repo, body)

    def _create(self, payload: dict[str, Any]) -> None:
        repo_id = f"{payload.get('organization')}/{payload['name']}"
        with self.hub.lock:
            if repo_id in self.hub.repos:  # the Hub's 409 names the existing repo too
                return self._send(409, {"error": "You already created this dataset repo",
                                        "url": f"{self.hub.url}/datasets/{repo_id}"})
            self.hub.repos[repo_id] = Repo(private=payload.get("visibility") == "private")
        return self._send(200, {"url": f"{self.hub.url}/datasets/{repo_id}", "name": repo_id})

    def _validate_yaml(self, payload: dict[str, Any]) -> None:
        text = payload.get("content", "")
        try:
            meta = yaml.safe_load(text.split("---", 2)[1]) if text.startswith("---") else {}
        except (yaml.YAMLError, IndexError) as e:
            return self._send(400, {"errors": [{"message": f"invalid YAML: {e}"}]})
        if not isinstance(meta, dict):
            return self._send(400, {"errors": [{"message": "metadata is not a mapping"}]})
        return self._send(200, {"errors": [], "warnings": []})

    def _commit(self, repo_id: str, repo: Repo, body: bytes) -> None:
        lines = [json.loads(x) for x in body.splitlines() if x.strip()]
        files = dict(repo.files)
        ops: list[tuple[str, str]] = []
        for item in lines:
            key, value = item["key"], item["value"]
            if key == "file":
                files[value["path"]] = base64.b64decode(value["content"])
            elif key == "deletedFile":
                if value["path"] not in files:
                    return self._error(404, "A file with this name doesn't exist",
                                       "EntryNotFound")
                del files[value["path"]]
            elif key == "deletedFolder":
                files = {p: d for p, d in files.items()
                         if not p.startswith(value["path"].rstrip("/") + "/")}
            elif key != "header":
                return self._error(400, f"unsupported commit operation {key!r}")
            if key != "header":
                ops.append((key, value["path"]))
        oid = hashlib.sha1(body).hexdigest()
        repo.files = files  # one commit: every operation or none
        repo.commits.append({"oid": oid, "summary": lines[0]["value"]["summary"], "ops": ops})
        return self._send(200, {"commitUrl": f"{self.hub.url}/datasets/{repo_id}/commit/{oid}",
                                "commitOid": oid})
