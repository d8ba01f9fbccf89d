"""Reading requests and writing JSON: the byte-level behaviour of the original CLI."""

from __future__ import annotations

import json
import os
import sys
from typing import TextIO

from .. import strict_json
from ..errors import InputError


def read_request(path: str, field: str = "request") -> object:
    """The JSON in ``path`` (``-``: standard input), as raw Python data; a key repeated in an
    object is refused (``duplicate_key``). ``field``: the option the file came from
    (``request``, ``hf_config``), named by its errors."""
    # bytes, decoded here: stdin's text layer would follow the locale (a C locale
    # lets invalid bytes through as surrogates), and Windows editors add a BOM
    try:
        if path == "-":
            raw = sys.stdin.buffer.read()
        else:
            with open(path, "rb") as handle:
                raw = handle.read()
    except OSError as err:
        raise InputError("request_unreadable", field, path, type(err).__name__) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError("request_not_utf8", field, path) from None
    try:
        return strict_json.loads(text, field)
    except InputError:
        raise
    except ValueError as err:
        raise InputError("request_not_json", field, path, str(err)[:120]) from None


def write(text: str, stream: TextIO | None = None) -> None:
    """Write and flush; a reader that went away (``| head``) ends the output quietly."""
    stream = stream or sys.stdout
    try:
        stream.write(text)
        stream.flush()
    except BrokenPipeError:
        # without a traceback at exit either: stdout now points at /dev/null
        os.dup2(os.open(os.devnull, os.O_WRONLY), stream.fileno())


def emit_json(obj: object) -> None:
    """Today's JSON output, byte for byte: indent 2, UTF-8 as is, no NaN."""
    write(json.dumps(obj, indent=2, ensure_ascii=False, allow_nan=False) + "\n")
