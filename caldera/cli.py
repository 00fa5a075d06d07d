"""The ``caldera`` command: one subcommand per job, each parsed into a typed config."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from agent_scheduler.main import main as agent_main
from batch_scheduler.main import main as batch_main
from caldera._loop import sigterm_as_ctrl_c
from caldera.bench import suite as bench
from caldera.commands import audit, dry_run, redis_acl, status
from caldera.demo import run as demo
from cluster.kube.mirror_main import main as mirror_main
from cluster.runtime.flags import Parser
from sharding.main import main as sharding_main

PROCESSES = {
    "sharding": "run the sharding controller (caldera sharding --help for its flags)",
    "agent-scheduler": "run the agent scheduler (caldera agent-scheduler --help for its flags)",
    "batch-scheduler": "run the batch scheduler (caldera batch-scheduler --help for its flags)",
    "mirror": "mirror a Kubernetes cluster into the store (caldera mirror --help for its flags)",
}


def build_parser() -> Parser:
    parser = Parser(prog="caldera", description="caldera: a Kubernetes scheduler for AI clusters.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    audit.add_parser(sub)
    bench.add_parser(sub)
    demo.add_parser(sub)
    dry_run.add_parser(sub)
    redis_acl.add_parser(sub)
    status.add_parser(sub)
    # Process subcommands own their flags; main() hands them the rest of the command line.
    for name, help_text in PROCESSES.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in PROCESSES:
        entry = {
            "sharding": sharding_main,
            "agent-scheduler": agent_main,
            "batch-scheduler": batch_main,
            "mirror": mirror_main,
        }[argv[0]]
        return entry(argv[1:], prog=f"caldera {argv[0]}")
    args = build_parser().parse_args(argv)
    sigterm_as_ctrl_c()  # and inside a command's event loop, SIGTERM cancels its coroutine (caldera._loop)
    try:
        return int(args.run(args))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
