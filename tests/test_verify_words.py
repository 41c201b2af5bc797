"""``kreassign verify`` names an unfinished partition in the words ``status``, ``list`` and ``replay`` use
(``engine.views.progress.PARTITION_WORDS``), with what it adds after a colon."""

import pytest

from engine.cli.verify import UNFINISHED
from engine.core.state import ABORTING, IN_FLIGHT, PENDING, READY, WAITING
from engine.views.progress import PARTITION_WORDS, counts_of


@pytest.mark.parametrize("status", [PENDING, READY, WAITING, IN_FLIGHT, ABORTING])
def test_an_unfinished_partition_is_named_as_status_counts_it(status):
    key = next(k for k, n in counts_of({status: 1}).items() if n)  # where status, list and replay count it
    assert UNFINISHED[status].split(":")[0] == dict(PARTITION_WORDS)[key]
