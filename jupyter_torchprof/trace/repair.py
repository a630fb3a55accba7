r"""Repairs of JSON text that known trace writers get wrong, tried only where a decode failed.

Each repair returns the text and how many strings it changed; a text it has
nothing to do on comes back as the very same object (callers test ``is``),
so trying a repair costs one pattern search and never a copy.

- `repair_quotes`: torch's ``export_chrome_trace`` (2.13 and earlier) writes
  a ``"`` inside a ``record_function`` name as it is (``"name": "say "hi""``),
  which makes the whole file invalid JSON. Torch writes one key per line,
  so on such a line the value runs from the first ``"`` after the key to the
  last ``"`` of the line, and the quotes between can be escaped.
- `replace_lone_surrogates`: ``\ud800`` without its low half (or a low half
  alone) is valid JSON text but not a string any decoder here returns; the
  escape becomes ``\ufffd`` (U+FFFD) and only that character is lost.
"""

from __future__ import annotations

import re

#: A ``"key": "value",`` line of torch's layout (group 2: the value as written).
#: Raw newlines cannot occur inside JSON strings, so a line bounds the value.
_KEY_LINE = re.compile(rb'^([ \t]*"[^"\\\r\n]+":[ \t]*")([^\r\n]*)("[ \t]*,?[ \t]*\r?)$', re.MULTILINE)
#: A ``"`` not escaped: preceded by an even number of backslashes.
_BARE_QUOTE = re.compile(rb'(?<!\\)((?:\\\\)*)"')
#: An escaped backslash (skipped, so that ``\\ud800`` stays text), a valid
#: surrogate pair, or (group 1) a lone half.
_SURROGATE = re.compile(
    rb"\\\\|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|(\\u[dD][89a-fA-F][0-9a-fA-F]{2})"
)


def repair_quotes(data: bytes) -> tuple[bytes, int]:
    """Escape the bare ``"`` inside string values of torch's one-key-per-line layout.

    Returns the text and how many values were repaired (0: ``data`` itself).
    Only lines that hold a single ``"key": "value"`` pair are touched; a
    valid line has no bare quote in its value and is left as it is.
    """
    found = 0

    def fix(m: re.Match[bytes]) -> bytes:
        nonlocal found
        value = m.group(2)
        if b'"' not in value:
            return m.group(0)
        escaped, n = _BARE_QUOTE.subn(rb'\1\\"', value)
        if not n:
            return m.group(0)
        found += 1
        return m.group(1) + escaped + m.group(3)

    if b'"' not in data:
        return data, 0
    fixed = _KEY_LINE.sub(fix, data)
    return (fixed, found) if found else (data, 0)


def replace_lone_surrogates(data: bytes) -> tuple[bytes, int]:
    r"""Replace each lone surrogate escape (``\ud800`` ...) with ``\ufffd``.

    Returns the text and how many escapes were replaced (0: ``data`` itself).
    Valid pairs (an emoji written as two escapes) are kept.
    """
    if b"\\u" not in data:
        return data, 0
    found = 0

    def fix(m: re.Match[bytes]) -> bytes:
        nonlocal found
        if m.group(1) is None:
            return m.group(0)
        found += 1
        return b"\\ufffd"

    fixed = _SURROGATE.sub(fix, data)
    return (fixed, found) if found else (data, 0)
