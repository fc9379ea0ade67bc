"""`jsontext.dumps` writes the text `json.dumps(value, indent=N)` writes."""

from __future__ import annotations

import json
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from edgesynth.jsontext import dumps

SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text()  # NUL, quotes, backslashes, control and non-ASCII characters
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(), inner)
        | st.dictionaries(st.integers() | st.floats(allow_nan=False) | st.booleans(), inner)
    ),
    max_leaves=40,
)


@settings(max_examples=400, deadline=None)
@given(VALUES, st.integers(0, 3))
def test_the_standard_librarys_text(value: object, indent: int) -> None:
    assert dumps(value, indent) == json.dumps(value, indent=indent)


def test_long_lists_of_numbers_and_special_values() -> None:
    doc = {
        "network": [
            {"name": 'a\0b\n"c"', "th": [0.1 * i for i in range(300)], "s": list(range(300))},
            {"empty": [], "none": {}, "odd": [math.inf, -math.inf, math.nan, True, None, "x"]},
        ],
        "solver": {"name": "edgesynth", "postscale_shift": 15},
    }
    assert dumps(doc) == json.dumps(doc, indent=1)
    assert dumps(doc, 4) == json.dumps(doc, indent=4)
