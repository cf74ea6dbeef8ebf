"""Broker recipes shipped with the harness (TOML, read with :mod:`importlib.resources`).

They prove the recipe format (``docs/recipes.md``) expresses the built-in kinds, and serve as
examples to copy for a broker of one's own.
"""
