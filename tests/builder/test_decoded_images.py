"""The builder decodes images with the evaluator's decoder (issue 22): the catalog's width and
height, the perceptual hashes of image dedup, and the images sent to the tagger are those of
the picture a browser shows (EXIF orientation applied, 16-bit and alpha as a viewer shows)."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image

from builder.crawl.download import inspect_image
from builder.image_dedup import phash_hex
from builder.tagging.rules import Img, image_part
from builder.workdir import WorkDir


def encode(im: Image.Image, fmt: str = "PNG", **kw) -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt, **kw)
    return buf.getvalue()


def oriented_jpeg(orientation: int) -> bytes:
    im = Image.new("RGB", (64, 32), (0, 0, 255))
    im.paste((255, 0, 0), (0, 0, 32, 32))
    exif = Image.Exif()
    exif[0x0112] = orientation
    return encode(im, "JPEG", quality=95, exif=exif.tobytes())


def test_the_catalog_records_the_upright_size():
    status, reason, info = inspect_image(oriented_jpeg(6), 10**6)
    assert (status, reason) == ("ok", "JPEG 32x64")
    assert (info["width"], info["height"]) == (32, 64)
    assert inspect_image(oriented_jpeg(1), 10**6)[1] == "JPEG 64x32"


def test_the_tagger_is_sent_the_upright_picture(tmp_path):
    wd = WorkDir.open(tmp_path / "w")
    sha, _ = wd.store_image_bytes(oriented_jpeg(6), "jpg")
    part = image_part(wd, Img(sha, "jpg", "JPEG", []))
    assert part.mime_type == "image/png"
    with Image.open(io.BytesIO(part.data)) as im:
        assert im.size == (32, 64)
        r, g, b = im.convert("RGB").getpixel((16, 4))
        assert r > 200 and b < 60  # the stored left half, red, is the top
    plain = oriented_jpeg(1)
    sha1, _ = wd.store_image_bytes(plain, "jpg")
    assert image_part(wd, Img(sha1, "jpg", "JPEG", [])).data == plain  # sent as stored


def test_the_tagger_sees_transparency_on_white(tmp_path):
    wd = WorkDir.open(tmp_path / "w")
    sha, _ = wd.store_image_bytes(encode(Image.new("RGBA", (4, 4), (0, 0, 0, 0))), "png")
    part = image_part(wd, Img(sha, "png", "PNG", []))
    with Image.open(io.BytesIO(part.data)) as im:
        assert im.mode == "RGB" and im.getpixel((0, 0)) == (255, 255, 255)


def test_phash_of_16_bit_pictures_sees_their_content(tmp_path):
    """Clipped to white, every 16-bit picture had the same phash (distance 0)."""
    yy, xx = np.mgrid[0:64, 0:64]
    board = (((yy // 16 + xx // 16) % 2) * 60000 + 3000).astype(np.uint16)
    stripes = ((((yy + xx) // 8) % 2) * 60000 + 3000).astype(np.uint16)
    (tmp_path / "a.png").write_bytes(encode(Image.fromarray(board)))
    (tmp_path / "b.png").write_bytes(encode(Image.fromarray(stripes)))
    a, b = phash_hex(tmp_path / "a.png"), phash_hex(tmp_path / "b.png")
    assert bin(int(a, 16) ^ int(b, 16)).count("1") > 12
    # and the hash is that of the upright picture
    (tmp_path / "six.jpg").write_bytes(oriented_jpeg(6))
    upright = Image.new("RGB", (32, 64), (0, 0, 255))
    upright.paste((255, 0, 0), (0, 0, 32, 32))
    (tmp_path / "up.jpg").write_bytes(encode(upright, "JPEG", quality=95))
    assert bin(int(phash_hex(tmp_path / "six.jpg"), 16)
               ^ int(phash_hex(tmp_path / "up.jpg"), 16)).count("1") <= 4


def test_a_urls_csv_row_with_an_extra_field_is_one_error(tmp_path):
    """Every CSV the project reads goes through the strict reader (issue 22)."""
    import pytest

    from builder.crawl.search import URL_COLUMNS, urls_searches
    from builder.stagekit import StageInputError

    f = tmp_path / "u.csv"
    good = {"concept": "food", "country": "THA", "language": "th", "rank": "1",
            "image_url": "https://img.example/a.jpg", "page_url": "", "title": ""}
    row = ",".join(good.get(c, "") for c in URL_COLUMNS)
    f.write_text(",".join(URL_COLUMNS) + f"\n{row}\n{row},extra\n", encoding="utf-8")
    with pytest.raises(StageInputError, match=rf"^{f}: line 3 has {len(URL_COLUMNS) + 1} "
                                              rf"field\(s\), the header has {len(URL_COLUMNS)}"):
        urls_searches(f)
