"""The evaluator's image gate (issue 15): an image whose header declares more pixels than the
cap is refused before anything is decoded (Pillow's MAX_IMAGE_PIXELS is only its warning
level: a 16000x16000 PNG, 31 KB on disk, used to be decoded to 4 GB and scored)."""

from __future__ import annotations

import io
import struct
import zlib

import pytest
from PIL import Image, ImageFile

from benchmark.data import images as imgs
from core.errors import DataError


def bomb_png(side: int) -> bytes:
    """A valid 1-bit PNG of ``side`` x ``side`` zero pixels (a few tens of KB)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    comp = zlib.compressobj(9)
    row = b"\x00" * (1 + (side + 7) // 8)
    body = b"".join(comp.compress(row * 1000) for _ in range(side // 1000)) + comp.flush()
    ihdr = struct.pack(">IIBBBBB", side, side, 1, 0, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", body)
            + chunk(b"IEND", b""))


def png(w: int, h: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (w, h), (10, 20, 30)).save(buf, "PNG")
    return buf.getvalue()


@pytest.fixture
def decodes(monkeypatch):
    """Every ImageFile.load call (the decode), by image size."""
    seen: list[tuple[int, int]] = []
    real = ImageFile.ImageFile.load

    def load(self):
        seen.append(self.size)
        return real(self)

    monkeypatch.setattr(ImageFile.ImageFile, "load", load)
    return seen


def test_a_16000_square_png_is_refused_unopened(decodes):
    bomb = bomb_png(16000)
    assert len(bomb) < 64_000
    with pytest.raises(imgs.ImageRefused) as e:
        imgs.decode_image(bomb, "bomb")
    assert str(e.value).startswith("refused image bomb: ")
    assert "256000000 pixels" in str(e.value) and decodes == []


def test_the_cap_is_ours_below_pillows_own_levels(decodes):
    with pytest.raises(imgs.ImageRefused, match=r"refused image x: 400x300 = 120000 pixels "
                                                r"exceeds the cap 100000"):
        imgs.decode_image(png(400, 300), "x", max_pixels=100_000)
    assert decodes == []
    assert imgs.decode_image(png(40, 30), "y").size == (40, 30) and set(decodes) == {(40, 30)}
    # the evaluator no longer moves Pillow's global warning level (twice it is Pillow's error)
    assert Image.MAX_IMAGE_PIXELS == 89_478_485


def test_check_decodable_reports_refused_and_undecodable_apart(decodes):
    store = imgs.ImageStore.from_bytes({"ok": png(8, 8), "bomb": bomb_png(16000),
                                        "junk": b"<html>not an image</html>"})
    with pytest.raises(DataError) as e:
        store.check_decodable(["ok", "bomb", "junk"])
    msg = str(e.value)
    assert msg.startswith(f"1 image(s) refused over the decompression-bomb cap of "
                          f"{imgs.MAX_PIXELS} pixels, first: bomb (")
    assert msg.endswith("; 1 undecodable image(s), first: junk")
    assert (16000, 16000) not in decodes
