"""The documentation covers the public API and the README stays an entry page."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import kcpstream
import kcpstream.features

ROOT = Path(__file__).resolve().parents[1]


def _documented() -> set:
    """The objects the API reference renders (``::: dotted.path`` lines)."""
    text = (ROOT / "docs" / "reference.md").read_text()
    found = set()
    for path in re.findall(r"^::: ([\w.]+)", text, flags=re.M):
        module, _, name = path.rpartition(".")
        obj = __import__(path) if not module else None
        if obj is None:
            parent = __import__(module, fromlist=[name])
            obj = getattr(parent, name)
        found.add(id(obj))
        if inspect.ismodule(obj):  # a module's page renders its public members
            found.update(id(getattr(obj, m)) for m in getattr(obj, "__all__", []))
    return found


def test_every_public_name_is_in_the_api_reference():
    documented = _documented()
    missing = [
        f"{mod.__name__}.{name}"
        for mod in (kcpstream, kcpstream.features)
        for name in mod.__all__
        if not name.startswith("__")
        and (inspect.isclass(getattr(mod, name)) or inspect.isfunction(getattr(mod, name)))
        and id(getattr(mod, name)) not in documented
    ]
    assert missing == []


def test_the_readme_is_an_entry_page_with_the_ci_command():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    # .ci/run executes the block after this marker
    assert re.search(r"<!-- ci:test -->\n```bash\n.*mkdocs build --strict.*pytest\n```", text)
