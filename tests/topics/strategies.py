"""Hypothesis strategies for topic tests."""

from __future__ import annotations

from hypothesis import strategies as st

# Legal namespace characters beyond the identifier set, so that validation and
# matching are exercised with spaces, non-ASCII text and regex metacharacters.
_NAMESPACE_CHARS = "abcXYZ019_.-~@ é()[]?|\\"

# Levels that also occur in the fixed part of topics: matching must anchor on
# the suffix and not be fooled by a namespace such as 'x/a2a/v1'.
_TRICKY_LEVELS = st.sampled_from(["a2a", "v1", "agent", "response", "status", "discovery", "agentcards"])

namespace_levels = st.one_of(st.text(alphabet=_NAMESPACE_CHARS, min_size=1, max_size=10), _TRICKY_LEVELS)
namespaces = st.lists(namespace_levels, min_size=1, max_size=4).map("/".join)
identifiers = st.from_regex(r"[A-Za-z0-9_.-]{1,128}", fullmatch=True)
