"""What a pushed task is made of: its draft, and the URLs under which Label Studio shows images
(local-files storage, or ``python -m annotation serve-images``).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from annotation.client import AnnotationError

log = logging.getLogger(__name__)


@dataclass
class TaskDraft:
    """A task to import: its key, catalog link, data and pre-annotation."""

    key: str
    data: dict[str, Any]
    prediction: list[dict[str, Any]]
    group_id: int | None = None
    sha256: str | None = None


class ImageLinks:
    """URLs under which Label Studio's browser sees the work dir's images."""

    def __init__(self, images_dir: Path, mode: str, document_root: str | None = None):
        self.images_dir = images_dir.resolve()
        self.mode = mode
        if mode == "local-files":
            root = document_root or os.environ.get("LOCAL_FILES_DOCUMENT_ROOT")
            if not root:
                raise AnnotationError(
                    "--images local-files needs --document-root or LOCAL_FILES_DOCUMENT_ROOT "
                    "(the same value the Label Studio server was started with)"
                )
            self.root = Path(root).expanduser().resolve()
            if not self.images_dir.is_relative_to(self.root):
                raise AnnotationError(
                    f"the images folder {self.images_dir} is not under the local-files document "
                    f"root {self.root}; start Label Studio with a document root above the work dir"
                )
        elif mode.startswith(("http://", "https://")):
            self.base = mode.rstrip("/")
        else:
            raise AnnotationError(
                f"--images must be 'local-files' or the http URL of serve-images, got {mode!r}"
            )

    def url(self, sha256: str, ext: str) -> str:
        ext = ext.lstrip(".").lower()
        if self.mode == "local-files":
            rel = (self.images_dir / sha256[:2] / f"{sha256}.{ext}").relative_to(self.root)
            return "/data/local-files/?d=" + quote(rel.as_posix())
        return f"{self.base}/img/{sha256}.{ext}"

    def ensure_storage(self, client: Any, project_id: int) -> None:
        """Local-files mode: a never-synced local storage covering the images folder."""
        if self.mode != "local-files":
            return
        path = str(self.images_dir)
        for s in client.import_storage.local.list(project=project_id):
            if (s.path or "").rstrip("/") == path:
                return
        client.import_storage.local.create(
            project=project_id, path=path, title="3XCM images (serving only, do not sync)",
            use_blob_urls=False,
        )
        log.info("created local-files storage %s for project %d", path, project_id)
