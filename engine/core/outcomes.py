"""What a cluster says to an action: ``Ok``, ``Refused`` or ``Unavailable``.

Every adapter turns its client library's errors into one of these; none of
them ever raises for something the cluster said. The engine decides on the
type:

* ``Ok``: done, or nothing to do (the action is idempotent: cancelling a
  reassignment that is not in progress, electing a leader that already leads).
* ``Refused(code, message)``: the cluster said no and will say no again
  (``INVALID_REPLICA_ASSIGNMENT``, ``UNKNOWN_TOPIC_OR_PARTITION``,
  ``PREFERRED_LEADER_NOT_AVAILABLE`` ...). ``code`` is Kafka's error name.
* ``Unavailable(message)``: the cluster could not be asked or did not answer
  (broker not available, timeout, connection refused). The outcome is unknown;
  every action is idempotent, so the caller repeats it later.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Ok:
    note: str = ""  # e.g. "no reassignment in progress" for an idempotent no-op


@dataclass(frozen=True, slots=True)
class Refused:
    code: str  # Kafka's error name, e.g. INVALID_REPLICA_ASSIGNMENT
    message: str = ""

    def __str__(self) -> str:
        return f"{self.code}: {self.message}" if self.message else self.code


@dataclass(frozen=True, slots=True)
class Unavailable:
    message: str

    def __str__(self) -> str:
        return self.message


Result = Ok | Refused | Unavailable

OK = Ok()


def first_failure(results) -> Result:
    """One result for many: the first ``Unavailable``, else the first ``Refused``, else ``OK``."""
    refused = None
    for r in results:
        if isinstance(r, Unavailable):
            return r
        if isinstance(r, Refused) and refused is None:
            refused = r
    return refused or OK
