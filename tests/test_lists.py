"""mlx_builder.lists: comma lists parsed one way, with errors that say what
was wrong and what to pass."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mlx_builder.errors import ConfigError
from mlx_builder.lists import comma_ints, comma_list, known_items, loose_list


def test_comma_list_drops_blanks_and_spaces():
    assert comma_list(" a, b,,c ,") == ("a", "b", "c")
    assert comma_list("") == () and comma_list(None) == ()


@given(st.lists(st.text(alphabet="abcxyz019-_.", min_size=1, max_size=6), max_size=6))
def test_comma_list_round_trips_a_joined_list(items):
    assert comma_list(", ".join(items)) == tuple(items)


def test_loose_list_takes_commas_semicolons_and_spaces():
    assert loose_list("90a;121a, 80\n86") == ("90a", "121a", "80", "86")
    assert loose_list(" ; ") == () and loose_list(None) == ()


def test_comma_ints():
    assert comma_ints("256, 512") == (256, 512)
    with pytest.raises(ConfigError, match="not a comma list of integers"):
        comma_ints("256,x", "dims")
    with pytest.raises(ConfigError, match="an empty list of dims"):
        comma_ints(" , ", "dims")


def test_known_items_names_every_unknown_one():
    assert known_items(("cudnn",), ("flash", "cudnn"), "torch backend") == ("cudnn",)
    with pytest.raises(ConfigError, match=r"unknown torch backend\(s\): a, b") as info:
        known_items(("a", "flash", "b"), ("flash", "cudnn"), "torch backend")
    assert "flash, cudnn" in info.value.why
