"""One LV section of a metadata text, as bytes, turned into its checked ``LVSection``.

LVM writes every thin volume's section in one shape (key order, flush-left lines,
integers without leading zeros, strings without escapes): ``CANONICAL_THIN``
matches exactly that shape and the section is built from its groups with the
same checks ``LVSection`` applies, with no tokeniser. Anything else (another key
or order, a comment, an escape, a leading zero, indentation, a value past the
limits, another kind of LV) is parsed by the general parser, alone. Both readers
(the full parse and the incremental one) use ``section_from_text``: one parse.
"""

from __future__ import annotations

import re
from typing import Any, Final

from lvm_driver.read.metadata_values import (ID, MAX_UINT32, NAME, SEGMENT_CHECKS,
                                             MetadataUnsupported, tags_of)
from lvm_driver.read.vg_metadata import (LVSection_FLAGS, LVSection_STATUS, LVSection, flag_set,
                                         parse_text)

__all__ = ["CANONICAL_THIN", "canonical_thin", "section_from_text"]

_NAME: Final = NAME.pattern.encode()
#: a tag's characters LVM allows, but "#" (a comment's mark, left to the general parser)
_TAG: Final = rb'"[A-Za-z0-9_+.\-/=!:&]{1,1024}"'
#: 0, or digits without a leading zero (the limits are checked on the integer)
_INT: Final = rb"(0|[1-9][0-9]{0,19})"
#: printable ASCII but '"', "\\", "#", "{" and "}": a string the general parser reads as it is
_PLAIN: Final = rb'[ !$-\[\]-z|~]*'
#: a thin volume's section as LVM writes it into a metadata area, with the blank
#: lines before it; a real text has a blank line before "type", a generated one not
CANONICAL_THIN: Final = re.compile(
    rb'\n*(?P<name>' + _NAME + rb') \{\n'
    rb'id = "(?P<id>' + ID.pattern.encode() + rb')"\n'
    rb'status = \["READ", "WRITE", "VISIBLE"\]\n'
    rb'flags = \[(?P<skip>"ACTIVATION_SKIP")?\]\n'
    rb'(?:tags = \[(?P<tags>' + _TAG + rb'(?:, ' + _TAG + rb')*)\]\n)?'
    rb'creation_time = ' + _INT + rb'\n'
    rb'creation_host = "(?P<host>' + _PLAIN + rb')"\n'
    rb'segment_count = 1\n\n'
    rb'segment1 \{\n'
    rb'start_extent = 0\n'
    rb'extent_count = ' + _INT + rb'\n\n?'
    rb'type = "thin"\n'
    rb'thin_pool = "(?P<pool>' + _NAME + rb')"\n'
    rb'transaction_id = ' + _INT + rb'\n'
    rb'device_id = ' + _INT + rb'\n'
    rb'(?:origin = "(?P<origin>' + _NAME + rb')"\n)?'
    rb'\}\n\}\n')
#: the general parser's integers are 64-bit signed: it refuses more
_INT64_LIMIT: Final = 2 ** 63
_STATUS: Final = ("READ", "WRITE", "VISIBLE")
_FLAGS: Final = {False: (), True: ("ACTIVATION_SKIP",)}


def section_from_text(name: str, text: bytes, start: int, end: int,
                      canonical: re.Match[bytes] | None, memo: dict[object, Any]) -> LVSection:
    """The checked section of LV ``name``, ``text[start:end]`` (blank lines, then
    ``name {`` to its ``}``; ``canonical``: ``CANONICAL_THIN``'s match of exactly that,
    if any); MetadataUnsupported where the general parser reading that text alone
    would refuse it or read anything but that one LV."""
    if canonical is not None:
        found = canonical_thin(name, canonical, memo)
        if found is not None:
            return found
    tree = parse_text(text[start:end].decode("utf-8"))
    if list(tree) != [name]:
        raise MetadataUnsupported(f"section {name} does not parse as that one LV")
    return LVSection(name, tree[name], memo)


def canonical_thin(name: str, match: re.Match[bytes],
                   memo: dict[object, Any]) -> LVSection | None:
    """The section of thin volume ``name`` from ``CANONICAL_THIN``'s match of it when
    every value passes ``LVSection``'s checks, else None (not refused: the general
    parser then gives the answer, report or refusal)."""
    (found, uuid, skip, tags_text, created, host, extents, pool, transaction, device,
     origin) = match.groups()
    length, transaction_id, device_id = int(extents), int(transaction), int(device)
    if found.decode() != name or not (
            int(created) < _INT64_LIMIT and 0 < length <= MAX_UINT32
            and transaction_id < _INT64_LIMIT and device_id < _INT64_LIMIT):
        return None
    segment: dict[str, Any] = {"start_extent": 0, "extent_count": length, "type": "thin",
                               "thin_pool": pool.decode(), "transaction_id": transaction_id,
                               "device_id": device_id}
    if origin is not None:
        segment["origin"] = origin.decode()
    key = ("canonical thin", skip, tags_text)
    shared = memo.get(key)
    try:
        SEGMENT_CHECKS["thin"](segment, name)
        if shared is None:
            shared = memo[key] = _shared(name, skip is not None, tags_text, memo)
    except MetadataUnsupported:
        return None
    lv = LVSection.__new__(LVSection)
    lv.name, lv.uuid, lv.segments, lv.extents, lv.kind = (name, uuid.decode(), [segment],
                                                          length, "thin")
    lv.status, lv.flags, lv.tags, lv.alloc = shared
    return lv


def _shared(name: str, skip: bool, tags_text: bytes | None,
            memo: dict[object, Any]) -> tuple[frozenset[str], frozenset[str],
                                              tuple[str, ...], str]:
    """What LVs of one flags and tags list share, checked and memoised as ``LVSection``
    does: status, flags, sorted tags and allocation policy."""
    status = flag_set(_STATUS, LVSection_STATUS, memo, name)
    flags = flag_set(_FLAGS[skip], LVSection_FLAGS, memo, name)
    tags = () if tags_text is None else tuple(tags_text[1:-1].decode().split('", "'))
    sorted_tags = memo.get(tags)
    if sorted_tags is None:
        sorted_tags = memo[tags] = tags_of({"tags": tags}, f"LV {name}")
    return status, flags, sorted_tags, "i"
