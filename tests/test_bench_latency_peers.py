"""``bench latency --peers`` takes ``none``: alkstore's rows alone (a real cluster's run)."""

from __future__ import annotations

import argparse

import pytest

from alkstore.bench.peers import LATENCY_PEERS
from alkstore.cli.bench import latency_peers


def test_none_measures_no_peer() -> None:
    assert latency_peers("none") == []
    assert latency_peers(" NONE ") == []


def test_peers_are_named_as_before() -> None:
    assert latency_peers(",".join(LATENCY_PEERS)) == list(LATENCY_PEERS)
    with pytest.raises(argparse.ArgumentTypeError, match="unknown"):
        latency_peers("pg-boss,none")
    with pytest.raises(argparse.ArgumentTypeError, match="empty list"):
        latency_peers(",")
