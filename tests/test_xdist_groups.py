"""The suite's parallel run keeps its groups together (``--dist loadgroup``).

Tests marked ``xdist_group(NAME)`` share one worker: the Ray tests (one Ray at a time on a
small machine) and each docs page's examples (a page's blocks run in order in one namespace;
a block that lands on another worker runs every block before it again). pytest-xdist adds
``@NAME`` to such a test's id, and groups by it; a pytest that ignores that (9.2 with xdist
3.8) spreads the groups over the workers without a word.
"""

from __future__ import annotations

import pytest


@pytest.mark.xdist_group("grouping-check")
def test_a_grouped_test_carries_its_group_in_its_id(request):
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("runs under pytest-xdist with --dist loadgroup (python -m pytest -n 2)")
    assert request.node.nodeid.endswith("@grouping-check"), (
        f"pytest-xdist could not group {request.node.nodeid!r}: this pytest and pytest-xdist do not work "
        "together for --dist loadgroup (see the pin in pyproject.toml)")
