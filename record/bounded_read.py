"""Reading a file someone gave us, bounded in bytes before and after decompression: the size is
checked before reading, and a gzip stream is abandoned the moment it passes the limit."""

from __future__ import annotations

import gzip
import io
import os
import zlib
from pathlib import Path

DEFAULT_MAX_BYTES = 200 * 2**20
GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 1 << 20


class FileTooLarge(ValueError):
    """A file (or what it inflates to) is over the limit; the message names both sizes."""


def size_text(n: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def read_bounded(source: bytes | str | os.PathLike[str], max_bytes: int = DEFAULT_MAX_BYTES,
                 what: str = "file") -> bytes:
    """The bytes of ``source`` (a path or bytes), gunzipped if gzip, never more than ``max_bytes``.
    Raises ``FileTooLarge``, ``OSError`` or ``ValueError`` (broken gzip), each for a person."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        data = bytes(source)
    else:
        size = os.path.getsize(source)
        if size > max_bytes:          # before reading it all into memory
            raise FileTooLarge(f"the {what} is {size_text(size)}; the limit is "
                               f"{size_text(max_bytes)}")
        data = Path(source).read_bytes()
    if len(data) > max_bytes:
        raise FileTooLarge(f"the {what} is {size_text(len(data))}; the limit is "
                           f"{size_text(max_bytes)}")
    if not data.startswith(GZIP_MAGIC):
        return data
    out = bytearray()
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as unzipped:
            while chunk := unzipped.read(_CHUNK):
                out += chunk
                if len(out) > max_bytes:
                    raise FileTooLarge(f"the {what} inflates to more than {size_text(max_bytes)}"
                                       f" (from {size_text(len(data))} of gzip); the limit is "
                                       f"{size_text(max_bytes)}")
    except (OSError, EOFError, zlib.error) as error:
        raise ValueError(f"the {what} is a broken gzip file ({error})") from None
    return bytes(out)
