"""Reading a produced report.html back the way a browser parses it, for tests that assert what
a reader of the page sees: its tables' cells, its elements and their attributes, its text."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser


@dataclass
class Element:
    tag: str
    attrs: dict[str, str]
    text: str = ""  # the text directly inside it and its children, up to its end tag


@dataclass
class Page:
    elements: list[Element] = field(default_factory=list)
    # Tables by their class: rows of cell texts (header rows included).
    tables: dict[str, list[list[str]]] = field(default_factory=dict)
    text: str = ""

    def find(self, tag: str, **attrs: str) -> list[Element]:
        return [
            e for e in self.elements
            if e.tag == tag and all(e.attrs.get(k.rstrip("_")) == v for k, v in attrs.items())
        ]


class _Parser(HTMLParser):
    _VOID = frozenset({"meta", "br", "img", "input", "hr", "link"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.page = Page()
        self._open: list[Element] = []
        self._table: str | None = None
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, {k: v or "" for k, v in attrs})
        self.page.elements.append(element)
        if tag not in self._VOID:
            self._open.append(element)
        if tag == "table":
            self._table = element.attrs.get("class", "")
            self.page.tables.setdefault(self._table, [])
        elif tag == "tr" and self._table is not None:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._row is not None and self._cell is not None:
            self._row.append("".join(self._cell).strip())
            self._cell = None
        elif tag == "tr" and self._row is not None and self._table is not None:
            self.page.tables[self._table].append(self._row)
            self._row = None
        elif tag == "table":
            self._table = None
        while self._open:
            element = self._open.pop()
            if element.tag == tag:
                break

    def handle_data(self, data: str) -> None:
        self._text.append(data)
        for element in self._open:
            element.text += data
        if self._cell is not None:
            self._cell.append(data)


def parse(html: str) -> Page:
    parser = _Parser()
    parser.feed(html)
    parser.close()
    parser.page.text = " ".join("".join(parser._text).split())
    return parser.page
