"""Effective-config helpers: combine a kind's default provider config with a per-resource
override, the same way in every SDK (deep merge, the override winning per key)."""

from __future__ import annotations

import copy
from typing import Any


def effective_config(default: Any | None, override: Any | None) -> Any | None:
    """Deep-merges `override` onto `default`, the override winning per key.

    Objects (dicts) merge recursively; any other override value (lists, scalars, and JSON
    `null` inside an object) replaces the default's value. With only one side present that
    side is returned (copied); with neither, `None`. Inputs are never mutated.
    """
    if default is None and override is None:
        return None
    if override is None:
        return copy.deepcopy(default)
    if default is None:
        return copy.deepcopy(override)
    return _merge(default, override)


def _merge(base: Any, over: Any) -> Any:
    if isinstance(base, dict) and isinstance(over, dict):
        out = {k: copy.deepcopy(v) for k, v in base.items()}
        for k, v in over.items():
            out[k] = _merge(out[k], v) if k in out else copy.deepcopy(v)
        return out
    return copy.deepcopy(over)


def effective_bundle(default: bytes, override: bytes) -> bytes:
    """The override bundle if it is non-empty, otherwise the default bundle."""
    return override if override else default
