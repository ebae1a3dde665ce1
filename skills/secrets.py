"""The engine's secrets: environment variables no skill may declare (``requires.env`` or
``entrypoint.env``), since declaring one would hand it to the skill.

- always: the bearer token of the servers and the graph database's credentials;
- the mail credentials, except to a skill that declares the ``sends-email`` effect (the one
  that sends the mail, confirmed by the caller);
- anything the library's owner lists in ``$SKILLGROVE_SECRETS`` (names, comma-separated).

>>> secret_reason("SKILLGROVE_TOKEN", effects=(), owner_listed=())
"the engine's bearer token"
>>> secret_reason("SMTP_PASSWORD", effects=("sends-email",), owner_listed=()) is None
True
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

SECRETS_ENV = "SKILLGROVE_SECRETS"

ENGINE_SECRETS = {
    "SKILLGROVE_TOKEN": "the engine's bearer token",
    "NEO4J_PASSWORD": "the graph database's password",
    "NEO4J_AUTH": "the graph database's credentials",
    "SKILLGROVE_NEO4J_PASSWORD": "the graph database's password",
}
MAIL_SECRETS = {
    "SMTP_PASSWORD": "the mail server's password",
    "SMTP_USER": "the mail server's user name",
}
MAIL_EFFECT = "sends-email"


def owner_listed(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The names in ``$SKILLGROVE_SECRETS``."""
    text = (os.environ if environ is None else environ).get(SECRETS_ENV, "")
    return tuple(name.strip() for name in text.split(",") if name.strip())


def secret_reason(name: str, *, effects: Iterable[str],
                  owner_listed: Iterable[str]) -> str | None:
    """Why a skill with ``effects`` may not be given the variable ``name``; None if it may."""
    if name in ENGINE_SECRETS:
        return ENGINE_SECRETS[name]
    if name in MAIL_SECRETS and MAIL_EFFECT not in set(effects):
        return (f"{MAIL_SECRETS[name]}, which only a skill with the '{MAIL_EFFECT}' effect "
                "may have")
    if name in set(owner_listed):
        return f"listed as a secret in ${SECRETS_ENV}"
    return None
