"""LVM's config-tree text (the syntax of lvm.conf and of VG metadata) parsed into dicts.

The grammar as libdevmapper's config parser reads it: sections ``name { ... }``,
settings ``key = value``, values that are strings (``"..."``: a backslash keeps
the next character in the string, and LVM drops it only before ``"`` and ``\\``),
integers, floats or lists ``[ v, v, ... ]`` of those, and ``#`` comments to the
end of the line; the text may end in NUL bytes (a metadata area's copy does).
A section is a dict, a list a tuple. Anything else, a name given twice in one
section, a NUL before the end (LVM's reader stops there), an integer beyond 64
bits or written with a leading zero (octal to LVM, ``08`` is 0) raises
ConfigTextError: the caller reads the same facts some other way rather than
guess. LVM writes one statement a line (a list may run over several), which is
read with string methods alone; a text with anything else on a line (a comment,
an escape, two statements) is parsed again by one regular expression matching
whole statements, each where the last ended (so a malformed text costs linear
time, never a search from every position): both give the same tree, the first
about twice as fast (a metadata text of 10,000 LVs in a few hundred
milliseconds).
"""

from __future__ import annotations

import re
from typing import Final, TypeAlias, Union

__all__ = ["ConfigTextError", "Value", "Section", "parse_config"]

Value: TypeAlias = Union[str, int, float, tuple[Union[str, int, float], ...]]
Section: TypeAlias = dict[str, Union[Value, "Section"]]


class ConfigTextError(ValueError):
    """The text is not LVM config-tree syntax as understood here."""


_BLANK: Final = r'(?:\s++|\#[^\n]*+)*+'
_STRING: Final = r'"(?:[^"\\]++|\\.)*+"'
_NUMBER: Final = r'-?[0-9]++(?:\.[0-9]+)?'
#: one statement: a section's end, a section's start, or a setting
_STATEMENT: Final = re.compile(
    rf'{_BLANK}(?:(?P<close>\}})|(?P<name>[^\s{{}}=\[\]",#]++){_BLANK}'
    rf'(?:(?P<open>\{{)|={_BLANK}(?:(?P<string>{_STRING})|(?P<number>{_NUMBER})'
    rf'|\[(?P<list>(?:[^\]"#]++|{_STRING})*+)\])(?=[\s}}#\x00]|\Z)))', re.S)
_LIST_ITEM: Final = re.compile(rf'\s*(?:(?P<string>{_STRING})|(?P<number>{_NUMBER}))\s*(,|$)',
                               re.S)
#: the escapes LVM undoes (dm_unescape_double_quotes); a backslash before anything
#: else stays in the string
_ESCAPE: Final = re.compile(r'\\([\\"])')
_TAIL: Final = re.compile(rf'{_BLANK}\x00*\Z', re.S)
#: what Python's ``str.strip`` and ``\s`` take for blanks but LVM's reader (C's isspace)
#: does not: LVM would read it as part of a name (the four ASCII ones first)
_OTHER_BLANKS: Final = tuple(char for char in map(chr, range(0x3001))
                             if char.isspace() and char not in " \t\n\r\x0b\x0c")
#: the longest integer text LVM's config reader (64-bit signed) takes: "-" and 19 digits
_INT64_DIGITS: Final = 20


def _string(quoted: str) -> str:
    body = quoted[1:-1]
    return _ESCAPE.sub(r'\1', body) if "\\" in body else body


def _number(text: str) -> int | float:
    """An integer within LVM's 64 bits, or a float; ConfigTextError for a longer integer
    (its length checked before ``int()``, which raises a bare ValueError past Python's
    digit limit)."""
    if "." in text:
        return float(text)
    if len(text) > 1 and text.lstrip("-")[:1] == "0" and text.lstrip("-") != "0":
        raise ConfigTextError(f"integer {text[:24]} has a leading zero (LVM reads it as "
                              f"octal)")
    if len(text) <= _INT64_DIGITS and -2 ** 63 <= (value := int(text)) < 2 ** 63:
        return value
    raise ConfigTextError(f"integer {text[:24]}{'...' if len(text) > 24 else ''} "
                          f"({len(text)} characters) is beyond the 64 bits LVM reads")


def _list(text: str) -> tuple[str | int | float, ...]:
    if not text.strip():
        return ()
    items: list[str | int | float] = []
    position = 0
    while position < len(text):
        match = _LIST_ITEM.match(text, position)
        if match is None or match.end() == position:
            raise ConfigTextError(f"malformed list [{text[:60]}]")
        string, number, comma = match.group("string", "number", 3)
        items.append(_string(string) if string is not None else _number(number))
        position = match.end()
        if not comma and position < len(text):
            raise ConfigTextError(f"malformed list [{text[:60]}]")
    return tuple(items)


def parse_config(text: str) -> Section:
    """The top-level section of ``text``; ConfigTextError on anything not understood."""
    if "\0" in text.rstrip("\0"):
        raise ConfigTextError(f"a NUL at offset {text.index(chr(0))}, before the end of "
                              f"the text (LVM's reader stops there)")
    if any(blank in text for blank in (
            _OTHER_BLANKS[:4] if text.isascii() else _OTHER_BLANKS)):
        raise ConfigTextError("a character Python takes for a blank and LVM does not")
    try:
        return _parse_lines(text)
    except _NotOneALine:
        return _parse_statements(text)


class _NotOneALine(Exception):
    """A line holds something else than one plain statement (or a list's part)."""


_NAME: Final = re.compile(r'[^\s{}=\[\]",#]+')


def _parse_lines(text: str) -> Section:
    """``text`` read one statement a line; _NotOneALine for any other line."""
    if "\\" in text:
        raise _NotOneALine
    root: Section = {}
    stack: list[Section] = [root]
    current = root
    lists: dict[str, tuple[str | int | float, ...]] = {}
    names: set[str] = set()  # names already found well-formed
    lines = iter(text.rstrip("\0").split("\n"))
    for line in lines:
        if "#" in line:
            line = line[:line.index("#")]
            if line.count('"') % 2:  # the '#' is in a string
                raise _NotOneALine
        line = line.strip()
        if not line:
            continue
        last = line[-1]
        if last == "}":
            if line != "}":
                raise _NotOneALine
            if len(stack) == 1:
                raise ConfigTextError("unbalanced '}'")
            stack.pop()
            current = stack[-1]
            continue
        if last == "{":
            name = line[:-1].rstrip()
            if name in current or (name not in names and not _NAME.fullmatch(name)):
                raise _NotOneALine
            names.add(name)
            section: Section = {}
            current[name] = section
            stack.append(section)
            current = section
            continue
        name, equals, value = line.partition(" = ")
        if not equals:
            name, equals, value = line.partition("=")
            name, value = name.rstrip(), value.lstrip()
        if not (equals and value) or name in current or (
                name not in names and not _NAME.fullmatch(name)):
            raise _NotOneALine
        names.add(name)
        first = value[0]
        if first == '"':  # no backslash in the text: a string is its two quotes
            if value[-1] != '"' or value.count('"') != 2:
                raise _NotOneALine
            current[name] = value[1:-1]
        elif first == "[":
            while value[-1] != "]":  # one list over several lines
                more = next(lines, "]]")
                if "#" in more:
                    raise _NotOneALine
                value += " " + more.strip()
            items = value[1:-1]
            if "[" in items or "]" in items:
                raise _NotOneALine
            found = lists.get(items)
            if found is None:
                found = lists[items] = _list(items)
            current[name] = found
        elif value.isdigit() and value.isascii():
            current[name] = _number(value)
        else:
            raise _NotOneALine
    if len(stack) != 1:
        raise _NotOneALine
    return root


def _parse_statements(text: str) -> Section:
    """``text`` parsed statement by statement with one regular expression."""
    root: Section = {}
    stack: list[Section] = [root]
    current = root
    lists: dict[str, tuple[str | int | float, ...]] = {}
    position = 0
    # each statement matched where the last one ended, never searched for further
    # on: a search from every position of a malformed run would be quadratic
    while (match := _STATEMENT.match(text, position)) is not None and (
            match.end() > position):
        position = match.end()
        close, name, opened, string, number, items = match.groups()
        if close is not None:
            if len(stack) == 1:
                raise ConfigTextError(f"unbalanced '}}' at offset {match.start()}")
            stack.pop()
            current = stack[-1]
            continue
        if name in current:
            raise ConfigTextError(f"{name!r} is given twice in one section")
        if opened is not None:
            section: Section = {}
            current[name] = section
            stack.append(section)
            current = section
        elif string is not None:
            current[name] = _string(string)
        elif number is not None:
            current[name] = _number(number)
        else:
            value = lists.get(items)
            if value is None:
                value = lists[items] = _list(items)
            current[name] = value
    if not _TAIL.match(text, position):
        raise ConfigTextError(f"cannot parse the text at offset {position}: "
                              f"{text[position:position + 40]!r}")
    if len(stack) != 1:
        raise ConfigTextError("a section is not closed at the end of the text")
    return root
