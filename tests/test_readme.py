"""The README's settings table names every setting, with its real default."""

from __future__ import annotations

import re

from app.settings import Settings
from tests.support import REPO


def test_every_setting_is_in_the_readme_table() -> None:
    readme = (REPO / "README.md").read_text()
    rows = dict(re.findall(r"^\| `(QUIRE_[A-Z0-9_]+)` \| `([^`]*)` \|", readme, re.M))
    defaults = Settings.model_construct()  # defaults only, no environment
    missing = []
    for name in Settings.model_fields:
        env = f"QUIRE_{name.upper()}"
        if env not in rows:
            missing.append(env)
            continue
        default = getattr(defaults, name)
        shown = rows[env]
        if not isinstance(default, (list, str)) or default:
            assert shown == str(default), f"{env}: README says {shown!r}, default is {default!r}"
    assert not missing, f"settings missing from README.md: {missing}"
