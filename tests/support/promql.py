"""The series and labels a PromQL expression reads, from a lexer that follows Prometheus's own.

No PromQL parser is installed in the project's environment (PyPI's ``promql-parser`` is not among
its requirements), so this follows ``promql/parser/lex.go`` of prometheus/prometheus: identifiers
``[a-zA-Z_:][a-zA-Z0-9_:]*`` (metric names may hold colons, label names may not), strings in
``"``, ``'`` or backticks with backslash escapes (not in backticks), numbers and durations, and the
keyword table (``key`` in lex.go: aggregators, ``and``/``or``/``unless``/``atan2``, ``offset``,
``by``/``without``/``on``/``ignoring``/``group_left``/``group_right``/``bool``, ``inf``/``nan``).
The grammar decides the rest (``generated_parser.y``): an identifier followed by ``(`` is a function
call; one that is no keyword and no function call is a vector selector's metric name; inside ``{}``
identifiers are label names of matchers; inside the ``(...)`` after ``by``/``without``/``on``/
``ignoring``/``group_left``/``group_right`` they are label names too. ``label_replace``'s and
``label_join``'s destination label (their first string argument) is a label the expression makes.
Tested on the tricky cases in ``test_promql_lexer.py``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: lex.go ``key``: aggregation operators.
AGGREGATORS = frozenset(
    {"sum", "avg", "count", "min", "max", "group", "stddev", "stdvar", "topk", "bottomk", "count_values",
     "quantile", "limitk", "limit_ratio"}
)
#: lex.go ``key``: set operators, ``atan2``, modifiers and ``bool``.
OPERATOR_WORDS = frozenset({"and", "or", "unless", "atan2", "offset", "bool"})
#: Keywords followed by a parenthesised label list (``group_left``/``group_right``: optionally).
GROUPING = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
NUMBER_WORDS = frozenset({"inf", "nan"})
LABEL_MAKERS = frozenset({"label_replace", "label_join"})
_KEYWORDS = AGGREGATORS | OPERATOR_WORDS | GROUPING

_TOKEN = re.compile(
    r"""
    (?P<space>\s+|\#[^\n]*)
  | (?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`[^`]*`)
  | (?P<duration>(?:\d+(?:ms|[smhdwy]))+(?!\w))
  | (?P<number>0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<ident>[a-zA-Z_:][a-zA-Z0-9_:]*)
  | (?P<op>=~|!~|!=|==|<=|>=|[-+*/%^<>=,(){}\[\]@:])
    """,
    re.VERBOSE,
)


@dataclass(frozen=True)
class Token:
    kind: str
    text: str


def tokens(expr: str) -> list[Token]:
    """Lex ``expr``; raises ValueError at the first character no PromQL token starts with."""
    out: list[Token] = []
    at = 0
    while at < len(expr):
        match = _TOKEN.match(expr, at)
        if match is None:
            raise ValueError(f"unexpected character {expr[at]!r} at {at} in {expr!r}")
        if match.lastgroup != "space":
            out.append(Token(match.lastgroup or "", match.group()))
        at = match.end()
    return out


@dataclass(frozen=True)
class Selector:
    """A vector selector: its metric name and the label names its matchers use."""

    metric: str
    matcher_labels: tuple[str, ...]


@dataclass
class Reads:
    """What one expression reads: selectors, label names in grouping clauses, labels it makes."""

    selectors: list[Selector] = field(default_factory=list)
    grouping_labels: set[str] = field(default_factory=set)
    made_labels: set[str] = field(default_factory=set)
    functions: set[str] = field(default_factory=set)

    @property
    def metrics(self) -> set[str]:
        return {s.metric for s in self.selectors}


def _unquote(text: str) -> str:
    return text[1:-1]


def _matchers(toks: list[Token], start: int) -> tuple[list[tuple[str, str, str]], int]:
    """Label matchers ``name op "value"`` from the ``{`` at ``start``; returns them and the index after ``}``."""
    assert toks[start].text == "{"
    found: list[tuple[str, str, str]] = []
    i = start + 1
    while toks[i].text != "}":
        if toks[i].text == ",":
            i += 1
            continue
        name, op, value = toks[i], toks[i + 1], toks[i + 2]
        if name.kind != "ident" or op.text not in {"=", "!=", "=~", "!~"} or value.kind != "string":
            raise ValueError(f"not a label matcher at {' '.join(t.text for t in toks[i:i + 3])!r}")
        found.append((name.text, op.text, _unquote(value.text)))
        i += 3
    return found, i + 1


def _label_list(toks: list[Token], start: int) -> tuple[list[str], int]:
    """Label names of the ``(a, b)`` at ``start``; returns them and the index after ``)``."""
    assert toks[start].text == "("
    names: list[str] = []
    i = start + 1
    while toks[i].text != ")":
        if toks[i].kind == "ident":
            names.append(toks[i].text)
        elif toks[i].text != ",":
            raise ValueError(f"not a label list at {toks[i].text!r}")
        i += 1
    return names, i + 1


@dataclass
class _OpenMaker:
    """An open label-making call: the paren depth inside it, and whether its destination label was found."""

    depth: int
    found: bool = False


def reads(expr: str) -> Reads:
    """The series, labels and functions ``expr`` reads."""
    toks = tokens(expr)
    out = Reads()
    makers: list[_OpenMaker] = []
    depth = 0
    i = 0
    while i < len(toks):
        tok = toks[i]
        nxt = toks[i + 1] if i + 1 < len(toks) else None
        if tok.text == "{":
            # A selector without a name: {__name__="..."} names its metric by matcher.
            matchers, i = _matchers(toks, i)
            names = [v for n, op, v in matchers if n == "__name__" and op == "="]
            out.selectors.append(Selector(names[0] if names else "", tuple(n for n, _, _ in matchers if n != "__name__")))
            continue
        if tok.text == "[":
            # Range or subquery: durations, numbers and ':' only.
            while toks[i].text != "]":
                i += 1
            i += 1
            continue
        if tok.text == "(":
            depth += 1
        elif tok.text == ")":
            depth -= 1
            while makers and makers[-1].depth > depth:
                makers.pop()
        elif tok.kind == "string":
            if makers and makers[-1].depth == depth and not makers[-1].found:
                out.made_labels.add(_unquote(tok.text))
                makers[-1].found = True
        elif tok.kind == "ident":
            word = tok.text
            if word.lower() in _KEYWORDS:  # lex.go looks keywords up in lower case
                word = word.lower()
            if word in GROUPING:
                if nxt is not None and nxt.text == "(":
                    names, i = _label_list(toks, i + 1)
                    out.grouping_labels.update(names)
                    continue
            elif word.lower() in NUMBER_WORDS or word in OPERATOR_WORDS and not (nxt is not None and nxt.text == "("):
                pass
            elif word in AGGREGATORS or (nxt is not None and nxt.text == "("):
                out.functions.add(word)
                if word in LABEL_MAKERS:
                    makers.append(_OpenMaker(depth + 1))
            else:
                if nxt is not None and nxt.text == "{":
                    matchers, i = _matchers(toks, i + 1)
                    out.selectors.append(Selector(word, tuple(n for n, _, _ in matchers)))
                    continue
                out.selectors.append(Selector(word, ()))
        i += 1
    return out
