"""Annotators who answer as themselves through Label Studio's API, for the real-server tests.

Accounts made by the admin through the API have no password, and an annotation the admin
creates "for" someone is saved by the admin (its ``updated_by``), so it does not count
(:mod:`annotation.reviews`). These people join through the organization's invitation link
(Label Studio's sign-up form, over HTTP), take their own legacy token, and then create,
update and fetch tasks from the labeling stream (``/api/projects/<id>/next``, what "Label All
Tasks" opens) as themselves.
"""

from __future__ import annotations

import re
import secrets
from typing import Any

import httpx


class Person:
    """One account of the test server, speaking the API with its own token."""

    def __init__(self, base_url: str, email: str, token: str, user_id: int):
        self.base_url, self.email, self.id = base_url, email, user_id
        self.http = httpx.Client(base_url=base_url, timeout=30,
                                 headers={"Authorization": f"Token {token}"})

    def annotate(self, task_id: int, result: list[dict[str, Any]],
                 cancelled: bool = False) -> int:
        """Submit an answer (or a skip) to a task; returns the annotation id."""
        r = self.http.post(f"/api/tasks/{task_id}/annotations",
                           params={"was_cancelled": "1"} if cancelled else None,
                           json={"result": result, "was_cancelled": cancelled})
        assert r.status_code == 201, r.text
        return int(r.json()["id"])

    def update(self, annotation_id: int, result: list[dict[str, Any]]) -> None:
        """Change an annotation (anyone's: Label Studio's community edition allows it)."""
        r = self.http.patch(f"/api/annotations/{annotation_id}", json={"result": result})
        assert r.status_code == 200, r.text

    def next_task(self, project_id: int) -> dict[str, Any] | None:
        """The task the labeling stream hands this person now, or None when it has none."""
        r = self.http.get(f"/api/projects/{project_id}/next")
        if r.status_code == 404:
            return None
        assert r.status_code == 200, r.text
        return r.json()

    def task(self, task_id: int) -> dict[str, Any]:
        r = self.http.get(f"/api/tasks/{task_id}")
        assert r.status_code == 200, r.text
        return r.json()


def join(base_url: str, admin_token: str, email: str) -> Person:
    """Sign ``email`` up through the invitation link and return them with their token."""
    admin = {"Authorization": f"Token {admin_token}"}
    invite = httpx.get(f"{base_url}/api/invite", headers=admin, timeout=10)
    assert invite.status_code == 200, invite.text
    path = invite.json()["invite_url"]
    with httpx.Client(base_url=base_url, timeout=30, follow_redirects=True) as web:
        page = web.get(path)
        csrf = web.cookies.get("csrftoken") or re.search(
            r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        r = web.post(path, data={"email": email, "password": secrets.token_urlsafe(12),
                                 "csrfmiddlewaretoken": csrf},
                     headers={"X-CSRFToken": csrf, "Referer": base_url + path})
        assert r.status_code == 200 and "/user/signup" not in str(r.url), r.text[-500:]
        tok = web.get("/api/current-user/token")
        assert tok.status_code == 200, tok.text
        me = web.get("/api/current-user/whoami").json()
    return Person(base_url, email, tok.json()["token"], int(me["id"]))
