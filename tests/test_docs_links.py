"""Every link between the docs lands: the file exists, and the heading an anchor names is in it (GitHub's slugs)."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted([*(ROOT / "docs").rglob("*.md"), ROOT / "README.md", ROOT / "tests/fixtures/logs/corpus/README.md"])
LINK = re.compile(r"\]\(([^)\s#]*)(?:#([^)\s]+))?\)")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, blanks as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.replace("`", "").strip().lower()).replace(" ", "-")


@cache
def anchors(page: Path) -> frozenset[str]:
    found: set[str] = set()
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        fenced ^= line.startswith("```")
        if not fenced and (heading := re.match(r"^#+ (.*)", line)):
            base = anchor = slug(heading[1])
            n = 0
            while anchor in found:  # a repeated heading gets -1, -2, …
                n += 1
                anchor = f"{base}-{n}"
            found.add(anchor)
    return frozenset(found)


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_link_of_the_page_lands(page):
    broken = []
    for target, anchor in LINK.findall(page.read_text(encoding="utf-8")):
        if target.startswith(("http://", "https://", "mailto:")) or not (target or anchor):
            continue
        linked = (page.parent / target).resolve() if target else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}#{anchor}: no such heading")
    assert broken == []
