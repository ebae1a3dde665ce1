"""Errors of the graph layer, under the one root :class:`skills.errors.SkillgroveError`::

    SkillgroveError
     └── GraphError
          ├── ModelError        the embedding model cannot be loaded
          ├── IndexMissingError no index yet: run `skillgrove index`
          └── StoreError        a store cannot be reached or used (the message says what to do)
"""

from __future__ import annotations

from skillgrove.skills.errors import SkillgroveError


class GraphError(SkillgroveError):
    """Something went wrong in the graph layer."""


class ModelError(GraphError):
    """The embedding model cannot be loaded."""


class IndexMissingError(GraphError):
    """There is no index yet."""


class StoreError(GraphError):
    """A store cannot be reached or used."""
