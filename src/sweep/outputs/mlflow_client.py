"""An MLflow client that rides out a tracking server's outage instead of failing the sweep."""

from __future__ import annotations

import time

from sweep.errors import SweepError


class TrackingUnavailable(SweepError):
    """MLflow did not answer within the retry window; the sweep goes on and logs the run later."""


class RetryingClient:
    """An ``MlflowClient`` whose every call is retried with bounded exponential backoff.

    Once a call has failed for ``retry_seconds`` the client is *offline*: later calls fail at once
    (a sweep must not wait a minute per call while the server is down) until :meth:`probe` finds
    the server answering again.
    """

    def __init__(self, client, retry_seconds: float):
        self._client, self.retry_seconds, self.offline = client, retry_seconds, False

    def probe(self) -> bool:
        """One quick call; True (and online again) when the store answers."""
        try:
            self._client.search_experiments(max_results=1)
        except Exception:  # noqa: BLE001 - any failure means "not yet"
            return False
        self.offline = False
        return True

    def __getattr__(self, name: str):
        method = getattr(self._client, name)

        def call(*args, **kwargs):
            deadline, delay = time.monotonic() + self.retry_seconds, 0.25
            while True:
                try:
                    return method(*args, **kwargs)
                except (TypeError, AttributeError, NameError):
                    raise  # our bug, not the server's
                except Exception as e:  # noqa: BLE001 - connection, HTTP 5xx, a locked SQLite file...
                    if self.offline or time.monotonic() + delay > deadline:
                        self.offline = True
                        reason = str(e).strip().splitlines()[0][:160] if str(e).strip() else type(e).__name__
                        raise TrackingUnavailable(f"MLflow does not answer ({name}: {reason})") from e
                    time.sleep(delay)
                    delay = min(2 * delay, 8.0)

        return call


__all__ = ["RetryingClient", "TrackingUnavailable"]
