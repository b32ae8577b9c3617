"""The one image decoder (issue 22): every Pillow mode becomes the RGB a viewer shows, EXIF
orientation is applied once, and a file above the size limit is refused unread.

Pixel values are exact where the definition gives them (module docstring of
``core.decode``): 16-bit grey is value / 257 rounded, alpha is composited over
white with ``round(c * a / 255 + 255 * (1 - a / 255))``."""

from __future__ import annotations

import io
import os
import resource

import numpy as np
import pytest
from PIL import Image

from benchmark.data.images import ImageStore
from core import decode as dec
from core.errors import DataError


def encode(im: Image.Image, fmt: str = "PNG", **kw) -> bytes:
    buf = io.BytesIO()
    im.save(buf, fmt, **kw)
    return buf.getvalue()


def pixels(im: Image.Image) -> list[tuple[int, int, int]]:
    assert im.mode == "RGB"
    return [tuple(int(c) for c in px) for px in np.asarray(im).reshape(-1, 3)]


def grey(*values: int) -> list[tuple[int, int, int]]:
    return [(v, v, v) for v in values]


# -- 16-bit and other wide modes ------------------------------------------------------------------
SIXTEEN = [0, 257, 32896, 65535]  # -> 0, 1, 128, 255


@pytest.mark.parametrize("mode", ["I;16", "I;16B", "I;16L", "I;16N"])
def test_16_bit_grey_is_scaled_by_257_not_clipped(mode):
    dtype = {"I;16": "<u2", "I;16L": "<u2", "I;16B": ">u2", "I;16N": "=u2"}[mode]
    im = Image.frombytes(mode, (4, 1), np.array(SIXTEEN, dtype).tobytes())
    assert pixels(dec.to_rgb(im)) == grey(0, 1, 128, 255)


def test_a_16_bit_png_decodes_scaled():
    im = Image.fromarray(np.array([SIXTEEN], np.uint16))
    assert im.mode == "I;16"
    data = encode(im)
    assert pixels(dec.decode_image(data, "x")) == grey(0, 1, 128, 255)


def test_mode_i_is_taken_as_16_bit_and_clipped():
    im = Image.fromarray(np.array([[-5, 0, 32896, 65535, 70000]], np.int32), "I")
    assert pixels(dec.to_rgb(im)) == grey(0, 0, 128, 255, 255)


def test_mode_f_is_0_to_1_clipped_nan_black():
    im = Image.fromarray(np.array([[0.0, 0.5, 1.0, 2.0, -1.0, np.nan]], np.float32), "F")
    assert pixels(dec.to_rgb(im)) == grey(0, 128, 255, 255, 0, 0)


def test_two_different_16_bit_gradients_are_not_the_same_picture():
    """The case of the issue: a vertical and a horizontal 16-bit gradient were both clipped to
    white (phash distance 0, cosine 0.9956) and one was removed as a near duplicate; decoded
    as a viewer shows them they are each other's transpose, uncorrelated."""
    ramp = np.linspace(0, 65535, 64).astype(np.uint16)
    a = dec.decode_image(encode(Image.fromarray(np.repeat(ramp[:, None], 64, axis=1))), "v")
    b = dec.decode_image(encode(Image.fromarray(np.repeat(ramp[None, :], 64, axis=0))), "h")
    assert a.getpixel((0, 0)) == (0, 0, 0) and a.getpixel((0, 63)) == (255, 255, 255)
    assert b.getpixel((63, 0)) == (255, 255, 255) and b.getpixel((0, 63)) == (0, 0, 0)
    va = np.asarray(a, np.float64).ravel() - 127.5
    vb = np.asarray(b, np.float64).ravel() - 127.5
    assert abs(va @ vb / np.linalg.norm(va) / np.linalg.norm(vb)) < 0.1


def test_two_different_16_bit_pictures_are_not_near_duplicates_by_phash():
    """Above the image-dedup stage's automatic phash distance (4): a 16-bit checkerboard and
    16-bit diagonal stripes (both clipped to white before, distance 0)."""
    import imagehash

    from builder.image_dedup import DedupConfig

    yy, xx = np.mgrid[0:64, 0:64]
    board = (((yy // 16 + xx // 16) % 2) * 60000 + 3000).astype(np.uint16)
    stripes = ((((yy + xx) // 8) % 2) * 60000 + 3000).astype(np.uint16)
    a = dec.decode_image(encode(Image.fromarray(board)), "a")
    b = dec.decode_image(encode(Image.fromarray(stripes)), "b")
    distance = bin(int(str(imagehash.phash(a)), 16)
                   ^ int(str(imagehash.phash(b)), 16)).count("1")
    assert distance > 3 * DedupConfig().phash_distance


# -- alpha over white ---------------------------------------------------------------------------
def test_rgba_is_composited_over_white():
    im = Image.new("RGBA", (3, 1))
    im.putdata([(0, 0, 0, 0), (100, 50, 0, 255), (100, 50, 0, 128)])
    # 100*128/255 + 255*127/255 = 177.2; 50 -> 152.1; 0 -> 127.0
    assert pixels(dec.decode_image(encode(im), "x")) == [(255, 255, 255), (100, 50, 0),
                                                        (177, 152, 127)]


def test_la_is_composited_over_white():
    im = Image.new("LA", (3, 1))
    im.putdata([(100, 0), (100, 255), (100, 128)])
    assert pixels(dec.decode_image(encode(im), "x")) == grey(255, 100, 177)


def _palette(transparent: int | None) -> Image.Image:
    im = Image.new("P", (2, 1))
    im.putpalette([200, 0, 0, 0, 0, 0] + [0] * (3 * 254))
    im.putdata([0, 1])
    if transparent is not None:
        im.info["transparency"] = transparent
    return im


@pytest.mark.parametrize("fmt", ["PNG", "GIF"])
def test_palette_with_transparency_goes_through_rgba(fmt):
    data = encode(_palette(1), fmt, transparency=1)
    assert pixels(dec.decode_image(data, "x")) == [(200, 0, 0), (255, 255, 255)]
    assert pixels(dec.decode_image(encode(_palette(None), fmt), "y")) == [(200, 0, 0), (0, 0, 0)]


def test_pa_is_composited_over_white():
    im = Image.new("PA", (2, 1))
    im.putpalette([200, 0, 0, 0, 0, 255] + [0] * (3 * 254))
    im.putdata([(0, 255), (1, 0)])
    assert pixels(dec.to_rgb(im)) == [(200, 0, 0), (255, 255, 255)]


# -- the plain modes -----------------------------------------------------------------------------
def test_cmyk_one_bit_and_grey():
    cmyk = Image.new("CMYK", (2, 1))
    cmyk.putdata([(0, 0, 0, 0), (255, 0, 0, 0)])
    assert pixels(dec.decode_image(encode(cmyk, "TIFF"), "c")) == [(255, 255, 255), (0, 255, 255)]
    one = Image.new("1", (2, 1))
    one.putdata([0, 1])
    assert pixels(dec.decode_image(encode(one), "1")) == grey(0, 255)
    gr = Image.new("L", (1, 1), 77)
    assert pixels(dec.decode_image(encode(gr), "L")) == grey(77)
    rgb = Image.new("RGB", (1, 1), (1, 2, 3))
    assert pixels(dec.decode_image(encode(rgb), "rgb")) == [(1, 2, 3)]


# -- EXIF orientation ----------------------------------------------------------------------------
def oriented_jpeg(orientation: int) -> bytes:
    """64x32 as stored: the left half red, the right half blue."""
    im = Image.new("RGB", (64, 32), (0, 0, 255))
    im.paste((255, 0, 0), (0, 0, 32, 32))
    exif = Image.Exif()
    exif[0x0112] = orientation
    return encode(im, "JPEG", quality=95, exif=exif.tobytes())


def near(px, want, tol=40) -> bool:
    return all(abs(a - b) <= tol for a, b in zip(px, want, strict=True))


def test_orientation_6_comes_out_upright():
    """Orientation 6: the viewer turns the stored picture 90 degrees clockwise, so the stored
    left half (red) is the top and the picture is 32 wide, 64 high."""
    im = dec.decode_image(oriented_jpeg(6), "x")
    assert im.size == (32, 64)
    assert near(im.getpixel((16, 4)), (255, 0, 0)) and near(im.getpixel((16, 60)), (0, 0, 255))


def test_orientation_1_and_3_and_8():
    assert dec.decode_image(oriented_jpeg(1), "a").size == (64, 32)
    turned = dec.decode_image(oriented_jpeg(3), "b")  # 180 degrees: red on the right
    assert turned.size == (64, 32) and near(turned.getpixel((60, 16)), (255, 0, 0))
    left = dec.decode_image(oriented_jpeg(8), "c")  # 90 counter-clockwise: red at the bottom
    assert left.size == (32, 64) and near(left.getpixel((16, 60)), (255, 0, 0))


def test_a_malformed_orientation_leaves_the_image_as_stored():
    assert dec.decode_image(oriented_jpeg(77), "x").size == (64, 32)


# -- refusals -------------------------------------------------------------------------------------
def test_a_0x0_image_is_refused(monkeypatch):
    im = Image.new("RGB", (1, 1))
    data = bytearray(encode(im, "GIF"))
    data[6:10] = b"\x00\x00\x00\x00"  # logical screen 0x0
    i = data.index(0x2C, 13)
    data[i + 5:i + 9] = b"\x00\x00\x00\x00"  # image descriptor 0x0
    with pytest.raises(DataError, match="undecodable image zero"):
        dec.decode_image(bytes(data), "zero")
    # a parser that does hand out a 0x0 image: refused before decoding, never a 0x0 picture
    monkeypatch.setattr(Image, "open", lambda fp: Image.new("RGB", (0, 0)))
    with pytest.raises(dec.ImageRefused) as e:
        dec.decode_image(encode(im), "zero")
    assert e.value.kind == "empty_image" and str(e.value) == "refused image zero: 0x0 image (no pixels)"


def test_a_sparse_2_gb_file_is_refused_unread(tmp_path):
    folder = tmp_path / "images"
    folder.mkdir()
    (folder / "ok-0-0.png").write_bytes(encode(Image.new("RGB", (4, 4))))
    big = folder / "ken-0-0.jpg"
    with open(big, "wb") as f:
        f.truncate(2 * 1024**3)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    with pytest.raises(dec.ImageRefused) as e:
        dec.read_image_file(big, "ken-0-0")
    assert e.value.kind == "too_large"
    assert str(e.value) == (f"refused image ken-0-0: file of {2 * 1024**3} bytes exceeds the "
                            f"limit of {dec.MAX_FILE_BYTES} bytes (file size limit)")
    with pytest.raises(DataError) as e2:
        ImageStore.from_folder(folder)
    assert str(e2.value) == (f"1 image(s) refused over the file size limit of "
                             f"{dec.MAX_FILE_BYTES} bytes (not read), first: ken-0-0 (file of "
                             f"{2 * 1024**3} bytes)")
    grown_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kb < 200 * 1024  # read whole, the peak would grow by 2 GB
    assert os.path.getsize(big) == 2 * 1024**3


def test_bytes_above_the_limit_are_refused_undecoded(monkeypatch):
    monkeypatch.setattr(dec, "MAX_FILE_BYTES", 100)
    with pytest.raises(dec.ImageRefused, match=r"1000 bytes exceeds the limit of 100 bytes"):
        dec.decode_image(b"\0" * 1000, "x")


def test_two_files_for_one_image_id_is_an_error_naming_both(tmp_path):
    folder = tmp_path / "images"
    (folder / "sub").mkdir(parents=True)
    (folder / "ken-0-0.png").write_bytes(encode(Image.new("RGB", (4, 4))))
    (folder / "sub" / "ken-0-0.jpg").write_bytes(encode(Image.new("RGB", (4, 4)), "JPEG"))
    (folder / "ok-1-0.png").write_bytes(encode(Image.new("RGB", (4, 4))))
    with pytest.raises(DataError) as e:
        ImageStore.from_folder(folder)
    assert str(e.value) == (f"--images {folder}: 1 image id(s) with more than one file; first: "
                            "ken-0-0: ken-0-0.png and sub/ken-0-0.jpg (keep one file per id)")
    assert ImageStore.from_folder(folder, wanted={"ok-1-0"}).ids == ["ok-1-0"]
