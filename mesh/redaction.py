"""What logs and error messages must never show: values under secret-named keys, URL passwords.

One rule for the whole project: the E2A response log (:mod:`mesh.e2a.log`) and config
errors (:mod:`mesh.config.errors`) both ask :func:`is_secret_key`.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

__all__ = ["is_secret_key", "redact_url"]

# Matched against the key lower-cased with "_" and "-" removed, so "authToken", "auth_token"
# and "X-Auth-Token" compare alike. "token" only matches as a suffix: "max_tokens" and
# "inputTokens" (usage counters) are not secrets, "tokenizer" neither.
_SECRET_KEY = re.compile(r"authorization|password|passwd|secret|apikey|privatekey|credential|cookie|token$")


def is_secret_key(key: str) -> bool:
    """True when a mapping key names a credential (case, ``_`` and ``-`` ignored)."""
    return bool(_SECRET_KEY.search(re.sub(r"[-_]", "", key.lower())))


def redact_url(url: str) -> str:
    """``url`` with its password replaced by ``***`` (for messages and logs)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()
