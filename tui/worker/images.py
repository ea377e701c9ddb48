"""Recognise an uploaded image by its first bytes, never by its name."""

from __future__ import annotations

from tui.errors import NotAnImage

__all__ = ["image_suffix"]

_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", ".png"),
    (b"\xff\xd8\xff", ".jpg"),
    (b"GIF87a", ".gif"),
    (b"GIF89a", ".gif"),
)


def image_suffix(data: bytes) -> str:
    """The file suffix of the image format `data` is in.

    Raises:
        TooLarge: code ``not_an_image``, status 415, for anything else.
    """
    for magic, suffix in _MAGIC:
        if data.startswith(magic):
            return suffix
    if len(data) >= 12 and data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return ".webp"
    error = NotAnImage("the upload is not an image (PNG, JPEG, GIF or WebP, told by its first bytes)")
    error.status = 415  # type: ignore[misc]
    raise error
