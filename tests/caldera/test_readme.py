"""The README documents every flag of every process, with its default."""

from __future__ import annotations

import argparse
from pathlib import Path

from agent_scheduler.main import build_parser as agent_parser
from batch_scheduler.main import build_parser as batch_parser
from cluster.kube.main import build_parser as mirror_parser
from sharding.main import build_parser as sharding_parser

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def test_every_process_flag_is_in_the_readme_with_its_default() -> None:
    section = {"sharding": README.split("`caldera sharding`:")[1].split("\n\n`")[0],
               "agent": README.split("`caldera agent-scheduler`:")[1].split("\n\n`")[0],
               "batch": README.split("`caldera batch-scheduler`:")[1].split("\n\n`")[0],
               "mirror": README.split("`caldera mirror`:")[1].split("## ")[0]}
    for name, parser in (("sharding", sharding_parser()), ("agent", agent_parser()), ("batch", batch_parser()),
                         ("mirror", mirror_parser())):
        check(parser, section[name])


def check(parser: argparse.ArgumentParser, table: str) -> None:
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        flag = action.option_strings[-1]
        row = next((line for line in table.splitlines() if line.startswith(f"| `{flag}` |")), None)
        assert row is not None, f"{flag} is not in the README's flag table"
        if action.default not in (None, False, ""):
            shown = row.split("|")[2]
            assert f"`{action.default}`" in shown, (flag, action.default, row)
