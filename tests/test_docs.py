"""docs/: the exit-code table is generated from errors.py; README stays short."""

from __future__ import annotations

import re
from pathlib import Path

from mlx_builder import errors

ROOT = Path(__file__).resolve().parents[1]


def test_exit_code_doc_matches_errors_py():
    doc = (ROOT / "docs" / "exit-codes.md").read_text(encoding="utf-8")
    assert doc == errors.exit_codes_markdown(), \
        "regenerate: python -m mlx_builder.errors > docs/exit-codes.md"


def test_every_error_class_is_in_the_table():
    doc = (ROOT / "docs" / "exit-codes.md").read_text(encoding="utf-8")
    classes = [c for c in vars(errors).values() if isinstance(c, type)
               and issubclass(c, errors.MlxBuilderError)]
    assert len(classes) > 15
    for cls in classes:
        assert f"| {cls.exit_code} | `{cls.__name__}` |" in doc


def test_readme_is_short_and_its_links_exist():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 100

    for target in re.findall(r"\]\(([^)#]+)\)", readme):
        if "://" not in target:
            assert (ROOT / target).exists(), target


def test_the_performance_page_shows_its_data_files():
    from mlx_builder.verify import perfpage
    docs = ROOT / "docs"
    page = (docs / perfpage.PAGE).read_text(encoding="utf-8")
    assert perfpage.update_page(page, perfpage.render_region(docs)) == page, \
        "regenerate: mlx-builder bench --report docs/perf/<gpu>.json --publish docs/"
    for data in (docs / perfpage.DATA_DIR).glob("*.json"):
        assert data.with_suffix(".png").exists(), f"{data.name} has no figure"
