"""The plugin hook marker. A plugin object marks its hook implementations with `hookimpl`."""

from __future__ import annotations

import pluggy

__all__ = ["PROJECT", "hookimpl"]

#: The pluggy project name; also the entry-point group plugins are published under.
PROJECT = "udm"

hookimpl = pluggy.HookimplMarker(PROJECT)
