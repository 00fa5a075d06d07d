"""The ``caldera`` command: one subcommand per job, each parsed into a typed config.

A subcommand's module is imported only when that subcommand runs (or when the whole parser is
built, for ``--help`` and the README's flag tables): each process and command starts without
the others' modules, which cost a second of imports together (Ray's, kubernetes', every bench).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

from caldera._loop import sigterm_as_ctrl_c
from cluster.runtime.flags import Parser

COMMANDS = {
    "audit": "caldera.commands.audit",
    "bench": "caldera.bench.command",
    "demo": "caldera.demo.run",
    "dry-run": "caldera.commands.dry_run",
    "redis-acl": "caldera.commands.redis_acl",
    "status": "caldera.commands.status",
}
"""Each command's module, whose ``add_parser(sub)`` adds its parser (``run`` set as its default)."""

PROCESSES = {
    "sharding": ("sharding.main", "run the sharding controller (caldera sharding --help for its flags)"),
    "agent-scheduler": (
        "agent_scheduler.main",
        "run the agent scheduler (caldera agent-scheduler --help for its flags)",
    ),
    "batch-scheduler": (
        "batch_scheduler.main",
        "run the batch scheduler (caldera batch-scheduler --help for its flags)",
    ),
    "mirror": (
        "cluster.kube.mirror_main",
        "mirror a Kubernetes cluster into the store (caldera mirror --help for its flags)",
    ),
}
"""Each process's module, whose ``main(argv, prog)`` parses the rest of the command line itself."""


def build_parser(argv: Sequence[str] = ()) -> Parser:
    """The ``caldera`` parser; with ``argv``, the parts that command line needs only."""
    parser = Parser(prog="caldera", description="caldera: a Kubernetes scheduler for AI clusters.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    only = argv[0] if argv and argv[0] in COMMANDS else None
    for name, module in COMMANDS.items():
        if only in (None, name):
            importlib.import_module(module).add_parser(sub, *([argv[1:]] if name == "bench" else []))
    # Process subcommands own their flags; main() hands them the rest of the command line.
    for name, (_, help_text) in PROCESSES.items():
        if only is None:
            sub.add_parser(name, help=help_text, add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in PROCESSES:
        entry = importlib.import_module(PROCESSES[argv[0]][0]).main
        return int(entry(argv[1:], prog=f"caldera {argv[0]}"))
    args = build_parser(argv).parse_args(argv)
    sigterm_as_ctrl_c()  # and inside a command's event loop, SIGTERM cancels its coroutine (caldera._loop)
    try:
        return int(args.run(args))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
