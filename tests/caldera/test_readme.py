"""The README documents what users type and watch: flag tables generated from the parsers, every metric."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from agent_scheduler.main import build_parser as agent_parser
from batch_scheduler.main import build_parser as batch_parser
from caldera import flag_docs
from cluster.kube.mirror_main import build_parser as mirror_parser
from cluster.runtime.flags import Parser, duration
from sharding.main import build_parser as sharding_parser

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_readme_flag_tables_are_what_the_parsers_render() -> None:
    assert flag_docs.block(README.read_text()) == flag_docs.render(), (
        f"README.md's flag tables are out of date: run `{flag_docs.COMMAND}`"
    )


@pytest.mark.parametrize(
    "parser", [sharding_parser(), agent_parser(), batch_parser(), mirror_parser()], ids=lambda p: p.prog
)
def test_every_process_flag_is_in_its_readme_table(parser: argparse.ArgumentParser) -> None:
    table = flag_docs.block(README.read_text()).split(f"`{parser.prog}`:\n")[1].split("\n\n`")[0]
    for action in parser._actions:
        for flag in action.option_strings:
            if flag not in ("-h", "--help"):
                assert f"`{flag}`" in table, f"{flag} of {parser.prog} is not in the README"


def test_a_table_shows_defaults_as_typed_and_help_without_its_default_note() -> None:
    p = Parser(prog="x")
    p.add_argument("--period", type=duration, default="60s", help="how often (default: 60s)")
    p.add_argument("--ratio", type=float, default=0.0, help="a | b")
    p.add_argument("--conf", default=None, help="conf file (default: the built-in one)")
    p.add_argument("--name", default="", help="a name")
    p.add_argument("--mode", default="soft", choices=["hard", "soft"], help="sharing")
    p.add_argument("-o", "--output", default="table", choices=["table", "json"], help="table or json")
    p.add_argument("--dry", action="store_true", help="only print")
    assert flag_docs.flag_table(p).splitlines() == [
        "| flag | default | what |",
        "|---|---|---|",
        "| `--period` | `60s` | how often |",
        "| `--ratio` | `0.0` | a \\| b |",
        "| `--conf` | the built-in one | conf file |",
        "| `--name` | — | a name |",
        "| `--mode` | `soft` | sharing (`hard` or `soft`) |",
        "| `--output`, `-o` | `table` | table or json |",
        "| `--dry` | off | only print |",
    ]


def test_check_fails_on_a_hand_edit_and_write_repairs_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n\nprose\n\n{flag_docs.BEGIN}\n| `--by-hand` | |\n{flag_docs.END}\n\n## Next\n")
    assert flag_docs.main(["--check", str(readme)]) == 1
    assert flag_docs.COMMAND in capsys.readouterr().err
    assert flag_docs.main(["--write", str(readme)]) == 0
    text = readme.read_text()
    assert text.startswith("# x\n\nprose\n\n") and text.endswith(f"{flag_docs.END}\n\n## Next\n")
    assert flag_docs.block(text) == flag_docs.render()
    assert flag_docs.main(["--check", str(readme)]) == 0


def test_a_file_without_the_markers_is_refused(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("# no markers\n")
    assert flag_docs.main(["--check", str(readme)]) == 2


def test_every_metric_the_processes_declare_is_in_the_readme() -> None:
    from prometheus_client import CollectorRegistry

    from agent_scheduler.metrics import AgentMetrics
    from batch_scheduler.metrics import BatchMetrics
    from binder.metrics import BinderMetrics
    from sharding.metrics import ShardMetrics

    registry = CollectorRegistry()
    for metrics in (AgentMetrics, BinderMetrics, ShardMetrics):
        metrics(registry)
    names = {m.name for m in registry.collect()}
    batch = CollectorRegistry()
    BatchMetrics(batch)  # shares some of Volcano's names with the agent scheduler: its own registry
    names |= {m.name for m in batch.collect()}
    mirror_source = (Path(__file__).resolve().parents[2] / "cluster" / "kube" / "mirror_main.py").read_text()
    names |= {
        n
        for n in ("caldera_mirror_lists", "caldera_mirror_status_patches", "caldera_mirror_events")
        if f'"{n}"' in mirror_source
    }
    section = README.read_text().split("## Metrics")[1].split("\n## ")[0]
    phases = "volcano_queue_pod_group_{pending,inqueue,running,unknown,completed}_count"
    assert len(names) > 20
    for name in sorted(names):
        # Counters are collected without their _total suffix
        shown = name.startswith("volcano_queue_pod_group_") and phases in section
        assert shown or f"`{name}" in section, f"metric {name} is not in the README's Metrics section"
