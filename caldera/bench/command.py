"""``caldera bench``'s parser: the suite's flags and one subcommand per bench.

Only the modules the command line names are imported: ``caldera bench agent`` loads the agent
bench, not the other ten (the whole suite's imports take about a second).
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence
from typing import Any

from caldera.flag_config import seconds
from cluster.runtime.flags import Parser

BENCHES = {
    "binder": "caldera.bench.binder",
    "sharding": "caldera.bench.sharding",
    "agent": "caldera.bench.agent",
    "batch": "caldera.bench.batch",
    "mixed": "caldera.bench.mixed",
    "peer": "caldera.bench.peer",
    "saturation": "caldera.bench.saturation",
    "trace": "caldera.bench.trace",
    "topology": "caldera.bench.topology",
    "chaos": "caldera.bench.chaos.command",
    "api": "caldera.bench.api",
}
"""Each bench's module, whose ``add_parser(sub)`` adds its subcommand."""


def run_suite(args: argparse.Namespace) -> int:
    from caldera.bench import suite

    return suite.run(args)


def add_parser(sub: Any, argv: Sequence[str] = ()) -> None:
    """``caldera bench``: the suite's flags, and one subcommand per bench (with ``argv``, the one it names)."""
    p = sub.add_parser(
        "bench", help="the benchmark suite (or one bench); each figure beside a baseline from the same run"
    )
    p.add_argument(
        "--trace",
        default=None,
        help="an OpenB-format pods CSV for the trace bench (default: the trace bench is skipped)",
    )
    p.add_argument("--trace-nodes", default=None, help="its nodes CSV")
    p.add_argument(
        "--mixed-duration",
        type=seconds,
        default="30s",
        help="how long the mixed bench's load runs: 90s, 30m or plain seconds (default: 30s)",
    )
    p.add_argument("--redis-url", default=None, help="use this Redis (default: start a private redis-server)")
    p.add_argument(
        "--quick", action="store_true", help="tiny sizes: checks that the suite runs; the figures mean little"
    )
    p.add_argument("--json", action="store_true", help="print one JSON object: every bench's full report and the table")
    p.set_defaults(run=run_suite)
    benches = p.add_subparsers(dest="bench", required=False, parser_class=Parser)
    named = next((a for a in argv if a in BENCHES), None)
    for name, module in BENCHES.items():
        if named in (None, name):
            importlib.import_module(module).add_parser(benches)
