"""The one image decoder: bytes -> the RGB picture a person sees in a browser or a viewer.

The builder, the evaluator and the release's ``width`` / ``height`` all use
:func:`decode_image`, so an image is never one picture to the model and another to an
annotator: file size checked before reading, pixels before decoding (our cap, not Pillow's
warning level), EXIF orientation applied once, every mode to RGB (16-bit grey / 257, alpha
over white; Pillow's ``convert("RGB")`` clips 16-bit and drops alpha). Rules: docs/builder.md.
"""

from __future__ import annotations

import io
import logging
import os
import warnings
from pathlib import Path
from typing import Any

from core.errors import DataError

log = logging.getLogger(__name__)

MAX_PIXELS = 178_956_970  # the evaluator's cap (Pillow's own error level, stated explicitly)
MAX_FILE_BYTES = 64 * 1024 * 1024  # an image file above this is refused unread
DECODER_VERSION = 2  # bump when the picture of some bytes changes (part of image cache keys)

_SIXTEEN_BIT = ("I;16", "I;16B", "I;16L", "I;16N", "I;16S", "I;16BS", "I;16LS")
_ALPHA = ("RGBA", "LA", "PA", "La", "RGBa")


class ImageRefused(DataError):
    """An image refused unread or unopened: over the pixel cap, 0x0, or a file too large."""

    def __init__(self, label: str, detail: str, kind: str = "decompression_bomb"):
        what = {"decompression_bomb": "decompression-bomb cap", "empty_image": "no pixels",
                "too_large": "file size limit"}[kind]
        super().__init__(f"refused image {label}: {detail} ({what})")
        self.label, self.detail, self.kind = label, detail, kind


def read_image_file(path: str | Path, label: str | None = None,
                    max_bytes: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of an image file, or :class:`ImageRefused` (``too_large``) above ``max_bytes``
    (checked with ``stat``, so a huge file is never read)."""
    path = str(path)
    size = os.stat(path).st_size
    if size > max_bytes:
        raise ImageRefused(label or path, f"file of {size} bytes exceeds the limit of "
                                          f"{max_bytes} bytes", "too_large")
    with open(path, "rb") as f:
        data = f.read(max_bytes + 1)  # a file that grew since the stat is still bounded
    if len(data) > max_bytes:
        raise ImageRefused(label or path, f"file of more than {max_bytes} bytes exceeds the "
                                          "limit", "too_large")
    return data


def open_image(data: bytes, label: str = "image", max_pixels: int = MAX_PIXELS) -> Any:
    """The PIL image of ``data`` opened from its header only, or :class:`ImageRefused` over
    ``max_pixels`` or with no pixels, or :class:`DataError` for bytes Pillow cannot identify."""
    from PIL import Image

    with warnings.catch_warnings():  # our cap decides, not Pillow's warning level
        warnings.simplefilter("ignore", Image.DecompressionBombWarning)
        try:
            im = Image.open(io.BytesIO(data))
        except Image.DecompressionBombError as e:
            raise ImageRefused(label, str(e).split(",", 1)[0]) from None
        except Exception as e:  # noqa: BLE001 - whatever the parser says, it is not an image
            raise DataError(f"undecodable image {label}: {type(e).__name__}: {e}") from e
    width, height = im.size
    if width * height > max_pixels:
        im.close()
        raise ImageRefused(
            label, f"{width}x{height} = {width * height} pixels exceeds the cap {max_pixels}")
    if width * height == 0:
        im.close()
        raise ImageRefused(label, f"{width}x{height} image", "empty_image")
    return im


def decode_image(data: bytes, label: str, max_pixels: int = MAX_PIXELS) -> Any:
    """The upright RGB PIL image a viewer shows, or :class:`ImageRefused` / :class:`DataError`."""
    if len(data) > MAX_FILE_BYTES:
        raise ImageRefused(label, f"{len(data)} bytes exceeds the limit of {MAX_FILE_BYTES} "
                                  "bytes", "too_large")
    im = open_image(data, label, max_pixels)
    try:
        with im:
            im.load()
            return to_rgb(upright(im))
    except Exception as e:  # noqa: BLE001 - any decoder failure is bad data
        raise DataError(f"undecodable image {label}: {type(e).__name__}: {e}") from e


def orientation(im: Any) -> int:
    """The EXIF ``Orientation`` of an opened image (1, upright, when absent or unreadable)."""
    try:
        value = im.getexif().get(0x0112, 1)
        return int(value) if int(value) in range(1, 9) else 1
    except Exception:  # noqa: BLE001 - a malformed EXIF block: shown as stored
        return 1


def upright(im: Any) -> Any:
    """``im`` turned as its EXIF orientation says (a loaded image; itself when upright)."""
    from PIL import ImageOps

    if orientation(im) == 1:
        return im
    try:
        return ImageOps.exif_transpose(im)
    except Exception as e:  # noqa: BLE001 - a malformed EXIF block: shown as stored
        log.debug("EXIF orientation of an image not applied: %s", e)
        return im


def to_rgb(im: Any) -> Any:
    """The RGB picture of a loaded PIL image of any mode."""
    import numpy as np
    from PIL import Image

    mode = im.mode
    if mode == "RGB":
        return im.copy()
    if mode in _SIXTEEN_BIT or mode == "I":
        a = np.asarray(im).astype(np.int64)
        grey = (np.clip(a, 0, 65535) + 128) // 257
        return _grey(grey.astype(np.uint8))
    if mode == "F":
        a = np.nan_to_num(np.asarray(im, dtype=np.float64), nan=0.0)
        return _grey(np.rint(np.clip(a, 0.0, 1.0) * 255).astype(np.uint8))
    if mode == "P" and ("transparency" in im.info or getattr(im.palette, "mode", "") == "RGBA"):
        im, mode = im.convert("RGBA"), "RGBA"
    if mode in _ALPHA:
        rgba = np.asarray(im.convert("RGBA"), dtype=np.uint32)
        c, a = rgba[..., :3], rgba[..., 3:4]
        out = (c * a + 255 * (255 - a) + 127) // 255
        return Image.fromarray(out.astype(np.uint8), "RGB")
    return im.convert("RGB")


def _grey(a: Any) -> Any:
    from PIL import Image

    return Image.fromarray(a, "L").convert("RGB")
