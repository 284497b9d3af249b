"""Retry intervals of Step methods (and Flow runs) under a ``RetryPolicy``."""

from __future__ import annotations

from dex.dexpb import dex_pb2 as pb

__all__ = ["DEFAULT_TOTAL_RETRY_DURATION", "retry_interval"]

DEFAULT_TOTAL_RETRY_DURATION = 4 * 3600.0
"""Retries stop after this many seconds since the first attempt unless the policy says otherwise."""
_DEFAULT_INITIAL_INTERVAL = 1.0
_DEFAULT_BACKOFF = 2.0
_DEFAULT_MAXIMUM_INTERVAL = 100.0


def retry_interval(policy: pb.RetryPolicy, attempt: int, retry_after: int) -> float:
    """Seconds before the attempt after ``attempt`` (a Worker's ``retry_after`` wins).

    Example::

        retry_interval(pb.RetryPolicy(initial_interval_seconds=1), 3, 0)  # 4.0
    """
    if retry_after > 0:
        return float(retry_after)
    initial = float(policy.initial_interval_seconds or _DEFAULT_INITIAL_INTERVAL)
    coefficient = float(policy.backoff_coefficient or _DEFAULT_BACKOFF)
    maximum = float(policy.maximum_interval_seconds or _DEFAULT_MAXIMUM_INTERVAL)
    return min(initial * coefficient ** (attempt - 1), maximum)
