"""The shape of the docs a newcomer reads first: the README's status and tables, the study page and its history, the
study configs' comments, no code under docs/, and every relative link in README.md and docs/ resolving."""

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _section(text: str, start: str) -> list[str]:
    """The lines from the one starting with ``start`` to the next blank line or heading."""
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith(start))
    out = []
    for line in lines[first:]:
        if not line.strip() or (out and line.startswith("#")):
            break
        out.append(line)
    return out


def test_readme_status_is_short_and_table_rows_fit():
    text = README.read_text()
    status = _section(text, "**Status.**")
    assert 1 <= len(status) <= 8, f"README Status has {len(status)} lines; keep it at most 8"
    long_rows = [line[:60] for line in text.splitlines() if line.startswith("|") and len(line) > 250]
    assert long_rows == [], f"README table rows over 250 characters: {long_rows}"


def test_readme_figures_rows_have_a_date_and_a_target():
    text = README.read_text()
    rows = _section(text, "| what | measured | date | target |")[2:]
    assert len(rows) >= 10
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert len(cells) == 4, row
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", cells[2]), f"no date in {row[:80]}"
        assert cells[3], f"no target in {row[:80]}"


def test_study_page_and_history_are_short():
    page = (REPO / "docs" / "smollm2-study.md").read_text().splitlines()
    assert len(page) <= 200, f"docs/smollm2-study.md has {len(page)} lines; keep it at most 200"
    history = (REPO / "docs" / "study" / "history.md").read_text()
    editions = re.split(r"^## ", history, flags=re.M)[1:]
    assert len(editions) >= 10
    for edition in editions:
        n = len(edition.rstrip().splitlines())
        assert n <= 30, f"history entry {edition.splitlines()[0]!r} has {n} lines; keep each at most 30"


def test_study_configs_have_at_most_20_comment_lines():
    found = [p for root in ("configs", "training") for p in (REPO / root).rglob("smollm2*.yaml")]
    configs = sorted(p for p in found if "study" in p.parts)
    assert configs, "no study config found"
    for path in configs:
        comments = [line for line in path.read_text().splitlines() if line.lstrip().startswith("#")]
        assert len(comments) <= 20, f"{path.relative_to(REPO)} has {len(comments)} comment lines; keep at most 20"


def test_no_code_under_docs():
    code = [str(p.relative_to(REPO)) for p in (REPO / "docs").rglob("*") if p.suffix in (".py", ".ipynb")]
    assert code == [], f"code under docs/ (move it to scripts/): {code}"


@pytest.mark.parametrize("page", [README, *sorted((REPO / "docs").rglob("*.md"))], ids=lambda p: p.name)
def test_relative_links_resolve(page):
    broken = []
    for target in LINK.findall(page.read_text()):
        if "://" in target or target.startswith("mailto:"):
            continue
        if not (page.parent / target).exists():
            broken.append(target)
    assert broken == [], f"{page.relative_to(REPO)} links to missing files: {broken}"
