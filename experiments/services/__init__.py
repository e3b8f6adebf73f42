"""Writes of the domain: keyword-only `<entity>_<action>` functions, one module per entity."""
