"""The consumer side of spec 12.3, for tests: check the frames a producer emitted."""

from __future__ import annotations

from collections.abc import Iterable

from mesh.e2a import E2A_RESPONSE_KIND_E2A_ERROR, E2A_RESPONSE_STATUS_FAILED, E2AResponse, E2ASequenceError

__all__ = ["validate_response_frames"]


def validate_response_frames(frames: Iterable[E2AResponse], *, require_final: bool = True) -> list[E2AResponse]:
    """Check the frames of one request against spec 12.3; return them sorted by ``sequence``.

    Frames may arrive in any order (a log is replayed by sequence). Raises
    :class:`E2ASequenceError` when the request ids differ, sequences are not exactly
    0..n-1, there is not exactly one final frame (at most one when ``require_final`` is
    False, for streams cut short) or it is not the last, or a failed frame is not ``e2a.error``.
    """
    ordered = sorted(frames, key=lambda f: f.sequence)
    if not ordered:
        raise E2ASequenceError("no frames to validate")
    request_ids = {f.request_id for f in ordered}
    if len(request_ids) != 1 or None in request_ids:
        shown = sorted(map(str, request_ids))
        raise E2ASequenceError(f"frames must share one non-null request_id, got {shown}")
    sequences = [f.sequence for f in ordered]
    if sequences != list(range(len(ordered))):
        raise E2ASequenceError(f"sequences must be 0..{len(ordered) - 1} without gaps or repeats, got {sequences}")
    finals = [f.sequence for f in ordered if f.is_final]
    if len(finals) > 1 or (require_final and not finals):
        raise E2ASequenceError(f"expected exactly one final frame, got {len(finals)} (sequences {finals})")
    if finals and finals[0] != ordered[-1].sequence:
        raise E2ASequenceError(f"frames follow the final frame (sequence {finals[0]} of {sequences[-1]})")
    for f in ordered:
        if f.status == E2A_RESPONSE_STATUS_FAILED and f.response_kind != E2A_RESPONSE_KIND_E2A_ERROR:
            raise E2ASequenceError(
                f"frame sequence {f.sequence} is failed but its response_kind is {f.response_kind!r}, not 'e2a.error'"
            )
    return ordered
