"""E2A protocol constants.

Names and values are verbatim from jiuwenswarm ``common/e2a/constants.py`` (commit 5b40c66) so
E2A peers and their code port unchanged; ``E2A_PROTOCOL_VERSION`` lives here rather than in
``models.py`` as upstream has it. Additions of this project are marked at the end of the file.
At runtime use the tuples, never the prose spec.
"""

from __future__ import annotations

E2A_PROTOCOL_VERSION = "1.0"

# provenance.source_protocol
E2A_SOURCE_PROTOCOL_E2A = "e2a"
E2A_SOURCE_PROTOCOL_ACP = "acp"
E2A_SOURCE_PROTOCOL_A2A = "a2a"

# E2AResponse.status
E2A_RESPONSE_STATUS_SUCCEEDED = "succeeded"
E2A_RESPONSE_STATUS_FAILED = "failed"
E2A_RESPONSE_STATUS_IN_PROGRESS = "in_progress"

# E2AResponse.response_kind; code uses the named constants so they cannot drift from the tuple.
E2A_RESPONSE_KIND_E2A_COMPLETE = "e2a.complete"
E2A_RESPONSE_KIND_E2A_CHUNK = "e2a.chunk"
E2A_RESPONSE_KIND_E2A_ERROR = "e2a.error"
E2A_RESPONSE_KIND_ACP_SESSION_UPDATE = "acp.session_update"
E2A_RESPONSE_KIND_ACP_PROMPT_RESULT = "acp.prompt_result"
E2A_RESPONSE_KIND_ACP_JSONRPC_ERROR = "acp.jsonrpc_error"
E2A_RESPONSE_KIND_ACP_OUTPUT_REQUEST = "acp.output_request"
E2A_RESPONSE_KIND_A2A_TASK = "a2a.task"
E2A_RESPONSE_KIND_A2A_MESSAGE = "a2a.message"
E2A_RESPONSE_KIND_A2A_STREAM_EVENT = "a2a.stream_event"
E2A_RESPONSE_KIND_CRON = "cron"
E2A_RESPONSE_KIND_PLAN_APPROVAL_REQUIRED = "plan.approval_required"
E2A_RESPONSE_KIND_EXT = "ext"

E2A_RESPONSE_KINDS: tuple[str, ...] = (
    E2A_RESPONSE_KIND_E2A_COMPLETE,
    E2A_RESPONSE_KIND_E2A_CHUNK,
    E2A_RESPONSE_KIND_E2A_ERROR,
    E2A_RESPONSE_KIND_ACP_SESSION_UPDATE,
    E2A_RESPONSE_KIND_ACP_PROMPT_RESULT,
    E2A_RESPONSE_KIND_ACP_JSONRPC_ERROR,
    E2A_RESPONSE_KIND_ACP_OUTPUT_REQUEST,
    E2A_RESPONSE_KIND_A2A_TASK,
    E2A_RESPONSE_KIND_A2A_MESSAGE,
    E2A_RESPONSE_KIND_A2A_STREAM_EVENT,
    E2A_RESPONSE_KIND_CRON,
    E2A_RESPONSE_KIND_PLAN_APPROVAL_REQUIRED,
    E2A_RESPONSE_KIND_EXT,
)

# a2a.stream_event body.branch -> one branch of A2A StreamResponse (snake_case here).
E2A_A2A_STREAM_BRANCHES: tuple[str, ...] = (
    "task",
    "message",
    "status_update",
    "artifact_update",
)

# The three ACP tuples below are E2A's, not ACP 0.12.1's, and are kept as E2A has them:
# E2A lists session/set_model (ACP replaced it with session/set_config_option),
# session/elicitation and session/elicitation/complete (ACP: elicitation/create,
# elicitation/complete) and the session-update kind todo_update (no such ACP kind). It lacks
# ACP's plan_update, plan_removed, session/delete, providers/*, nes/*, document/* and mcp/*.
# Check a method against the real ACP SDK before relying on it at an ACP edge.

# client -> agent JSON-RPC method names
ACP_CLIENT_TO_AGENT_METHODS: tuple[str, ...] = (
    "initialize",
    "authenticate",
    "session/new",
    "session/load",
    "session/list",
    "session/set_mode",
    "session/set_config_option",
    "session/prompt",
    "session/set_model",
    "session/fork",
    "session/resume",
    "session/close",
    "logout",
)

# agent -> client method names
ACP_AGENT_TO_CLIENT_METHODS: tuple[str, ...] = (
    "session/update",
    "session/request_permission",
    "fs/read_text_file",
    "fs/write_text_file",
    "terminal/create",
    "terminal/output",
    "terminal/release",
    "terminal/wait_for_exit",
    "terminal/kill",
    "session/elicitation",
)

ACP_NOTIFICATION_NAMES: tuple[str, ...] = (
    "session/cancel",
    "session/update",
    "session/elicitation/complete",
)

# Values of SessionUpdate.sessionUpdate (E2AEnvelope.session_update_kind)
ACP_SESSION_UPDATE_KINDS: tuple[str, ...] = (
    "user_message_chunk",
    "agent_message_chunk",
    "agent_thought_chunk",
    "tool_call",
    "tool_call_update",
    "todo_update",
    "plan",
    "available_commands_update",
    "current_mode_update",
    "config_option_update",
    "session_info_update",
    "usage_update",
)

# Wire-internal metadata keys: codec and queue bookkeeping between AgentServer and Gateway.
# They must never travel on as channel metadata, so from_dict drops them.
E2A_WIRE_LEGACY_AGENT_RESPONSE_KEY = "_e2a_wire_legacy_agent_response"
E2A_WIRE_LEGACY_AGENT_CHUNK_KEY = "_e2a_wire_legacy_agent_chunk"
E2A_WIRE_SERVER_PUSH_KEY = "_jiuwenswarm_server_push"
E2A_INTERNAL_CANCEL_SOURCE_KEY = "_jiuwenswarm_cancel_source"
E2A_CANCEL_SOURCE_CLIENT_DISCONNECT = "client_disconnect"

E2A_WIRE_INTERNAL_METADATA_KEYS: frozenset[str] = frozenset(
    {
        E2A_INTERNAL_CANCEL_SOURCE_KEY,
        E2A_WIRE_SERVER_PUSH_KEY,
        E2A_WIRE_LEGACY_AGENT_CHUNK_KEY,
        E2A_WIRE_LEGACY_AGENT_RESPONSE_KEY,
    }
)

# Chunked file transfer between Gateway and AgentServer (E2A methods / push event types)
FILE_TRANSFER_START = "file.transfer.start"
FILE_TRANSFER_CHUNK = "file.transfer.chunk"
FILE_TRANSFER_COMPLETE = "file.transfer.complete"
FILE_DOWNLOAD_START = "file.download.start"
FILE_DOWNLOAD_CHUNK = "file.download.chunk"
FILE_DOWNLOAD_COMPLETE = "file.download.complete"
FILE_TRANSFER_EVENT_TYPES: tuple[str, ...] = (
    FILE_TRANSFER_START,
    FILE_TRANSFER_CHUNK,
    FILE_TRANSFER_COMPLETE,
    FILE_DOWNLOAD_START,
    FILE_DOWNLOAD_CHUNK,
    FILE_DOWNLOAD_COMPLETE,
)
FILE_TRANSFER_ERROR_TIMEOUT = "file.transfer.timeout"
FILE_TRANSFER_ERROR_CHECKSUM_MISMATCH = "file.transfer.checksum_mismatch"
FILE_TRANSFER_ERROR_CHUNK_MISSING = "file.transfer.chunk_missing"
FILE_TRANSFER_ERROR_SIZE_EXCEEDED = "file.transfer.size_exceeded"
FILE_TRANSFER_ERROR_INVALID_FILE = "file.transfer.invalid_file"
FILE_TRANSFER_ERROR_TYPES: tuple[str, ...] = (
    FILE_TRANSFER_ERROR_TIMEOUT,
    FILE_TRANSFER_ERROR_CHECKSUM_MISMATCH,
    FILE_TRANSFER_ERROR_CHUNK_MISSING,
    FILE_TRANSFER_ERROR_SIZE_EXCEEDED,
    FILE_TRANSFER_ERROR_INVALID_FILE,
)

# --- Additions of this project (not in upstream): tuples the spec names only in prose. ---

# Every E2AResponse.status value (spec 12.2).
E2A_RESPONSE_STATUSES: tuple[str, ...] = (
    E2A_RESPONSE_STATUS_SUCCEEDED,
    E2A_RESPONSE_STATUS_FAILED,
    E2A_RESPONSE_STATUS_IN_PROGRESS,
)

# body.delta_kind of an e2a.chunk frame (spec 12.5).
E2A_CHUNK_DELTA_KINDS: tuple[str, ...] = ("text", "reasoning", "tool", "custom")
