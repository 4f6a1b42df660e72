"""``mesh eval``: run cases against the live mesh and score the answers.

An eval file (:mod:`mesh.evals.spec`) lists cases ``{name, agent, input, expect}``; each runs as an
ordinary task of its agent through a :class:`mesh.client.MeshClient` (:mod:`mesh.evals.runner`),
its answer checked by the scorers its ``expect`` names (:mod:`mesh.evals.scorers`); the results
print as a table and may be written as JUnit XML and JSON, and compared with an earlier JSON run
(:mod:`mesh.evals.report`). docs/eval.md is the user's page.
"""

from mesh.evals.scorers import Answer, Check, ToolCall
from mesh.evals.spec import Case, Expect, Suite, load_suite

__all__ = ["Answer", "Case", "Check", "Expect", "Suite", "ToolCall", "load_suite"]
