"""``-o jsonpath=TEMPLATE``: kubectl's JSONPath templates over the document ``-o json`` prints.

The syntax and output are kubectl's (k8s.io/client-go/util/jsonpath, as ``kubectl get -o
jsonpath=`` uses it), so a template written for kubectl reads the same here:

- text outside braces is printed as it is; ``{"\\n"}`` and ``{"\\t"}`` print a newline, a tab;
- ``{.a.b}`` or ``{$.a.b}`` a field, ``{.a.b\\.c}`` a key with dots (``{.a['b.c']}`` too, which
  kubectl reads as nothing), ``{.a['b','c']}`` several keys,
  ``{.items[0]}``, ``{.items[-1]}``, ``{.items[1:3]}`` an index or a slice, ``{.items[*]}`` or
  ``{.a.*}`` every element or value, ``{..name}`` every ``name`` at any depth, ``{.items[0,2]}`` a
  union;
- ``{.items[?(@.type=="Ready")].status}`` a filter: ``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=``
  against a string, a number, true, false or another path, or ``[?(@.key)]`` (present);
- ``{range .items[*]}{.id}{"\\n"}{end}`` repeats its body once per element, the element
  being ``@`` and the root of relative paths inside it.

Results of one action are separated by a space; strings print raw, numbers and booleans as
JSON does, objects and lists as compact JSON, null as nothing; a missing key prints nothing
(kubectl's ``get`` allows missing keys). No newline is added at the end, as kubectl adds
none. A malformed template is refused by ``compile_template`` (the command's exit 2, before
any request).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any, NamedTuple

MISSING = object()


class TemplateError(ValueError):
    """A template kubectl would refuse too: unbalanced braces, a range without end, a bad path."""


class Field(NamedTuple):
    name: str  # "*": every value


class Recursive(NamedTuple):
    name: str  # ..name; "*": every descendant


class Index(NamedTuple):
    items: tuple[int | str, ...]  # a union of indexes or quoted keys


class Slice(NamedTuple):
    start: int | None
    stop: int | None
    step: int | None


class Wildcard(NamedTuple):
    pass


class Filter(NamedTuple):
    left: Path
    operator: str | None  # None: the left path is present
    right: Path | object  # a literal value, or a Path


class Path(NamedTuple):
    absolute: bool  # $: from the document's root, else from the current element (@)
    steps: tuple[Field | Recursive | Index | Slice | Wildcard | Filter, ...]


class Text(NamedTuple):
    text: str


class Range(NamedTuple):
    path: Path
    body: tuple[Node, ...]


Node = Text | Path | Range


class Template(NamedTuple):
    nodes: tuple[Node, ...]

    def render(self, document: Any) -> str:
        return "".join(_render(self.nodes, document, document))


_NUMBER = re.compile(r"-?\d+(\.\d+)?([eE][-+]?\d+)?")
_OPERATORS = ("==", "!=", "<=", ">=", "<", ">")


def compile_template(template: str) -> Template:
    """The parsed template; TemplateError says what is wrong with it."""
    nodes, rest = _nodes(_actions(template), template, top=True)
    assert not rest
    return Template(tuple(nodes))


def _actions(template: str) -> Iterator[tuple[bool, str]]:
    """(inside braces, text) pieces; braces inside quoted strings do not count."""
    position = 0
    while position < len(template):
        opening = template.find("{", position)
        if opening < 0:
            yield False, template[position:]
            return
        if opening > position:
            yield False, template[position:opening]
        index = _closing(template, opening, f"unclosed action in {template!r}: a {{ without its }}")
        yield True, template[opening + 1 : index].strip()
        position = index + 1


def _nodes(pieces: Iterator[tuple[bool, str]], template: str, *, top: bool) -> tuple[list[Node], bool]:
    """Nodes up to the matching {end} (returned True) or the template's end."""
    nodes: list[Node] = []
    for inside, text in pieces:
        if not inside:
            nodes.append(Text(text))
        elif text == "end":
            if top:
                raise TemplateError(f"{{end}} without its {{range}} in {template!r}")
            return nodes, True
        elif text.startswith("range ") or text.startswith("range\t"):
            path = _path(text[len("range") :].strip())
            body, closed = _nodes(pieces, template, top=False)
            if not closed:
                raise TemplateError(f"{{range}} without its {{end}} in {template!r}")
            nodes.append(Range(path, tuple(body)))
        elif text[:1] in "\"'":
            nodes.append(Text(_string(text)))
        elif text == "":
            raise TemplateError(f"empty action {{}} in {template!r}")
        else:
            nodes.append(_path(text))
    return nodes, False


def _string(literal: str) -> str:
    if len(literal) < 2 or literal[-1] != literal[0]:
        raise TemplateError(f"unterminated string {literal!r}")
    body = literal[1:-1]
    if literal[0] == '"':
        try:
            return str(json.loads(literal))
        except json.JSONDecodeError:
            pass
    return body.replace("\\n", "\n").replace("\\t", "\t").replace("\\" + literal[0], literal[0])


def _path(text: str) -> Path:
    absolute = text.startswith("$")
    rest = text[1:] if text[:1] in "$@" else text
    steps: list[Field | Recursive | Index | Slice | Wildcard | Filter] = []
    position = 0
    while position < len(rest):
        if rest.startswith("..", position):
            name, position = _name(rest, position + 2)
            steps.append(Recursive(name))
        elif rest[position] == ".":
            if position + 1 < len(rest) and rest[position + 1] == "[":
                position += 1  # kubectl accepts .[0] as [0]
                continue
            name, position = _name(rest, position + 1)
            steps.append(Field(name))
        elif rest[position] == "[":
            closing = _closing(rest, position, f"unclosed [ in {text!r}")
            steps.append(_subscript(rest[position + 1 : closing].strip(), text))
            position = closing + 1
        elif position == 0 and not absolute:
            name, position = _name(rest, 0)  # {name}: kubectl reads it as {.name}
            steps.append(Field(name))
        else:
            raise TemplateError(f"unexpected {rest[position]!r} in path {text!r}")
    return Path(absolute, tuple(steps))


def _name(text: str, position: int) -> tuple[str, int]:
    name: list[str] = []
    while position < len(text) and text[position] not in ".[":
        if text[position] == "\\" and position + 1 < len(text):
            position += 1  # \. is a dot inside the key
        elif text[position] in " \t()=!<>\"'":
            raise TemplateError(f"unexpected {text[position]!r} in path {text!r}")
        name.append(text[position])
        position += 1
    if not name:
        raise TemplateError(f"a field name is missing in {text!r}")
    return "".join(name), position


def _closing(text: str, opening: int, unclosed: str) -> int:
    """The index of the brace or bracket that closes the one at ``opening`` (nested pairs and
    quoted strings skipped); TemplateError ``unclosed`` when there is none."""
    pair = {"{": "}", "[": "]"}
    start, end = text[opening], pair[text[opening]]
    depth, quote, index = 0, "", opening
    while index < len(text):
        char = text[index]
        if quote:
            if char == "\\":
                index += 1
            elif char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char == start:
            depth += 1
        elif char == end:
            depth -= 1
            if depth == 0:
                return index
        index += 1
    raise TemplateError(unclosed)


def _subscript(inner: str, text: str) -> Index | Slice | Wildcard | Filter:
    if inner == "*":
        return Wildcard()
    if inner.startswith("?"):
        expression = inner[1:].strip()
        if not (expression.startswith("(") and expression.endswith(")")):
            raise TemplateError(f"a filter is [?(EXPRESSION)], got [{inner}] in {text!r}")
        return _filter(expression[1:-1].strip(), text)
    if ":" in inner and inner[:1] not in "\"'":
        parts = [part.strip() for part in inner.split(":")]
        if len(parts) > 3:
            raise TemplateError(f"bad slice [{inner}] in {text!r}")
        try:
            bounds = [int(part) if part else None for part in parts] + [None] * (3 - len(parts))
        except ValueError:
            raise TemplateError(f"bad slice [{inner}] in {text!r}") from None
        return Slice(bounds[0], bounds[1], bounds[2])
    items: list[int | str] = []
    for part in (piece.strip() for piece in inner.split(",")):
        if part[:1] in "\"'":
            items.append(_string(part))
        else:
            try:
                items.append(int(part))
            except ValueError:
                raise TemplateError(f"bad index [{inner}] in {text!r}") from None
    return Index(tuple(items))


def _filter(expression: str, text: str) -> Filter:
    for operator in _OPERATORS:
        left, found, right = _split_outside_quotes(expression, operator)
        if found:
            return Filter(_relative(left.strip(), text), operator, _operand(right.strip(), text))
    return Filter(_relative(expression, text), None, MISSING)


def _split_outside_quotes(expression: str, operator: str) -> tuple[str, bool, str]:
    quote = ""
    for index, char in enumerate(expression):
        if quote:
            if char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif expression.startswith(operator, index):
            return expression[:index], True, expression[index + len(operator) :]
    return expression, False, ""


def _relative(operand: str, text: str) -> Path:
    if not operand.startswith(("@", "$")):
        raise TemplateError(f"a filter compares @.PATH (or $.PATH), got {operand!r} in {text!r}")
    return _path(operand)


def _operand(operand: str, text: str) -> Path | object:
    if operand[:1] in "\"'":
        return _string(operand)
    if operand in ("true", "false"):
        return operand == "true"
    if _NUMBER.fullmatch(operand):
        return float(operand) if any(c in operand for c in ".eE") else int(operand)
    return _relative(operand, text)


def _render(nodes: tuple[Node, ...] | list[Node], root: Any, current: Any) -> Iterator[str]:
    for node in nodes:
        if isinstance(node, Text):
            yield node.text
        elif isinstance(node, Range):
            for element in _expand(_evaluate(node.path, root, current)):
                yield from _render(node.body, root, element)
        else:
            yield " ".join(_text(value) for value in _evaluate(node, root, current))


def _expand(values: list[Any]) -> list[Any]:
    """What {range} iterates: the elements of one list result, else the results themselves."""
    if len(values) == 1 and isinstance(values[0], list):
        return list(values[0])
    return values


def _evaluate(path: Path, root: Any, current: Any) -> list[Any]:
    values = [root if path.absolute else current]
    for step in path.steps:
        values = [found for value in values for found in _step(step, value, root)]
    return values


def _step(step: Field | Recursive | Index | Slice | Wildcard | Filter, value: Any, root: Any) -> list[Any]:
    if isinstance(step, Field):
        if step.name == "*":
            return _children(value)
        return [value[step.name]] if isinstance(value, dict) and step.name in value else []
    if isinstance(step, Recursive):
        return [found for node in _descendants(value) for found in _step(Field(step.name), node, root)]
    if isinstance(step, Wildcard):
        return _children(value)
    if isinstance(step, Index):
        found = []
        for item in step.items:
            if isinstance(item, str):
                found.extend([value[item]] if isinstance(value, dict) and item in value else [])
            elif isinstance(value, list) and -len(value) <= item < len(value):
                found.append(value[item])
        return found
    if isinstance(step, Slice):
        return list(value[step.start : step.stop : step.step]) if isinstance(value, list) else []
    elements = value if isinstance(value, list) else [value] if isinstance(value, dict) else []
    return [element for element in elements if _matches(step, element, root)]


def _children(value: Any) -> list[Any]:
    if isinstance(value, list):
        return list(value)
    if isinstance(value, dict):
        return [value[key] for key in sorted(value)]
    return []


def _descendants(value: Any) -> Iterator[Any]:
    yield value
    for child in _children(value):
        yield from _descendants(child)


def _matches(step: Filter, element: Any, root: Any) -> bool:
    left = _evaluate(step.left, root, element)
    if step.operator is None:
        return bool(left)
    right = _evaluate(step.right, root, element) if isinstance(step.right, Path) else [step.right]
    if not left or not right:
        return False
    a, b = left[0], right[0]
    if step.operator == "==":
        return bool(_same(a, b))
    if step.operator == "!=":
        return not _same(a, b)
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (a, b))
    if not numbers and not (isinstance(a, str) and isinstance(b, str)):
        return False  # an order between a number and a string, or of booleans, holds for nothing
    order: int = (a > b) - (a < b)
    return {"<": order < 0, "<=": order <= 0, ">": order > 0, ">=": order >= 0}[step.operator]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    return bool(a == b)


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
