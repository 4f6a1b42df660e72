"""ACP agents as mesh agents: a coding agent that speaks the Agent Client Protocol on stdio.

:class:`AcpAgent` runs the ACP agent process (supervised as an A2E worker is) and serves it on
the mesh; :class:`ClientPolicy` answers its permission, file and terminal requests.
"""

from agents.acp.agent import AcpAgent
from agents.acp.policy import ClientPolicy

__all__ = ["AcpAgent", "ClientPolicy"]
