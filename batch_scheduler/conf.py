"""The scheduler conf, in Volcano's format, so an existing ``volcano-scheduler.conf`` works unchanged.

::

    actions: "enqueue, allocate, backfill"
    tiers:
    - plugins:
      - name: priority
      - name: gang
        enablePreemptable: false
    configurations:
    - name: enqueue
      arguments: {overcommit-factor: 1.2}

Everything is checked when the conf is loaded — action and plugin names, each plugin's
``enableXxx`` switches and argument names and values, action arguments, and drf's
hierarchy beside proportion in one tier — and a bad entry is one line naming it.
Argument values may be strings or YAML scalars (Volcano reads them as strings).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
import yaml

from batch_scheduler.framework import OTHER_SWITCHES, SWITCHES, Plugin, Tiers, number
from batch_scheduler.registry import ACTIONS, PLUGINS

DEFAULT_CONF = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""
"""The conf Volcano's Helm chart ships; used when no ``--scheduler-conf`` is given."""

KNOWN_SWITCHES = frozenset(SWITCHES.values()) | OTHER_SWITCHES
OVERCOMMIT_FACTOR = "overcommit-factor"


class ConfError(ValueError):
    """A conf that cannot be used; one line naming the entry, the value and what is accepted."""


class PluginOption(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    disabled: frozenset[str] = frozenset()  # switches set to false
    enabled: frozenset[str] = frozenset()  # switches set to true
    arguments: Mapping[str, str] = msgspec.field(default_factory=dict)


class SchedulerConf(msgspec.Struct, frozen=True, kw_only=True):
    actions: tuple[str, ...]
    tiers: tuple[tuple[PluginOption, ...], ...]
    action_arguments: Mapping[str, Mapping[str, str]] = msgspec.field(default_factory=dict)

    def build(self) -> Tiers:
        """Fresh plugin instances for one session, sorted into the extension points."""
        return Tiers([[(PLUGINS[o.name].create(self._arguments(o)), o.disabled) for o in tier] for tier in self.tiers])

    def _arguments(self, option: PluginOption) -> Mapping[str, str]:
        """The plugin's arguments; overcommit takes enqueue's ``overcommit-factor`` (where older
        Volcano confs put it) unless it states its own."""
        factor = self.argument("enqueue", OVERCOMMIT_FACTOR)
        if option.name == "overcommit" and factor is not None and OVERCOMMIT_FACTOR not in option.arguments:
            return {**option.arguments, OVERCOMMIT_FACTOR: factor}
        return option.arguments

    def argument(self, action: str, name: str) -> str | None:
        return self.action_arguments.get(action, {}).get(name)

    def has_plugin(self, name: str) -> bool:
        return any(o.name == name for tier in self.tiers for o in tier)


def _text(value: object, where: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise ConfError(f"scheduler conf: {where}: {value!r} is not a scalar (expected a string or number)")


def _arguments(raw: object, where: str) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfError(f"scheduler conf: {where}: expected a mapping of name: value, got {type(raw).__name__}")
    return {str(k): _text(v, f"{where}.{k}") for k, v in raw.items()}


def _plugin(raw: object, where: str) -> PluginOption:
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        raise ConfError(f"scheduler conf: {where}: expected a mapping with a name (e.g. - name: gang)")
    name = raw["name"]
    spec = PLUGINS.get(name)
    if spec is None:
        raise ConfError(f"scheduler conf: {where}: unknown plugin {name!r} (known: {', '.join(sorted(PLUGINS))})")
    where = f"{where} ({name})"
    disabled: set[str] = set()
    enabled: set[str] = set()
    for key, value in raw.items():
        if key in ("name", "arguments"):
            continue
        if key not in KNOWN_SWITCHES:
            raise ConfError(f"scheduler conf: {where}: unknown field {key!r} (expected name, arguments or an enable switch "
                            f"such as {', '.join(sorted(SWITCHES.values())[:4])}…)")
        if not isinstance(value, bool):
            raise ConfError(f"scheduler conf: {where}.{key}: {value!r} is not true or false")
        (enabled if value else disabled).add(key)
    arguments = _arguments(raw.get("arguments"), f"{where}.arguments")
    try:
        spec.create(arguments)  # checks argument names and values
    except ValueError as e:
        raise ConfError(f"scheduler conf: {where}.arguments: {e}") from None
    return PluginOption(name=name, disabled=frozenset(disabled), enabled=frozenset(enabled), arguments=arguments)


def parse_conf(text: str) -> SchedulerConf:
    """Read and check a conf; raises :class:`ConfError` with one line on anything wrong."""
    try:
        raw: Any = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfError(f"scheduler conf: invalid YAML: {' '.join(str(e).split())}") from None
    if not isinstance(raw, dict):
        raise ConfError("scheduler conf: expected a mapping with actions and tiers")
    for key in raw:
        if key not in ("actions", "tiers", "configurations"):
            raise ConfError(f"scheduler conf: unknown field {key!r} (expected actions, tiers, configurations)")
    if not isinstance(raw.get("actions"), str) or not raw["actions"].strip():
        raise ConfError('scheduler conf: actions: expected a comma-separated string, e.g. "enqueue, allocate, backfill"')
    actions = tuple(a.strip() for a in raw["actions"].split(",") if a.strip())
    for a in actions:
        if a not in ACTIONS:
            raise ConfError(f"scheduler conf: actions: unknown action {a!r} (known: {', '.join(sorted(ACTIONS))})")
    tiers_raw = raw.get("tiers")
    if not isinstance(tiers_raw, list) or not tiers_raw:
        raise ConfError("scheduler conf: tiers: expected a list of tiers, each with plugins")
    tiers: list[tuple[PluginOption, ...]] = []
    seen: set[str] = set()
    for i, tier in enumerate(tiers_raw):
        if not isinstance(tier, dict) or not isinstance(tier.get("plugins"), list):
            raise ConfError(f"scheduler conf: tiers[{i}]: expected a mapping with a list of plugins")
        options = tuple(_plugin(p, f"tiers[{i}].plugins[{j}]") for j, p in enumerate(tier["plugins"]))
        for o in options:
            if o.name in seen:
                raise ConfError(f"scheduler conf: tiers[{i}]: plugin {o.name!r} appears twice")
            seen.add(o.name)
        names = {o.name for o in options}
        drf = next((o for o in options if o.name == "drf"), None)
        if drf is not None and "enableHierarchy" in drf.enabled and "proportion" in names:
            raise ConfError(f"scheduler conf: tiers[{i}]: drf with enableHierarchy: true cannot share a tier with "
                            "proportion (both decide queue shares); move one to another tier")
        tiers.append(options)
    action_arguments: dict[str, dict[str, str]] = {}
    for k, entry in enumerate(raw.get("configurations") or []):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise ConfError(f"scheduler conf: configurations[{k}]: expected a mapping with a name and arguments")
        name = entry["name"]
        spec = ACTIONS.get(name)
        if spec is None:
            raise ConfError(f"scheduler conf: configurations[{k}]: unknown action {name!r} (known: {', '.join(sorted(ACTIONS))})")
        arguments = _arguments(entry.get("arguments"), f"configurations[{k}] ({name}).arguments")
        for arg in arguments:
            if arg not in spec.arguments:
                accepted = ", ".join(sorted(spec.arguments)) or "none"
                raise ConfError(f"scheduler conf: configurations[{k}] ({name}).arguments: unknown argument {arg!r} "
                                f"(accepted: {accepted})")
        if OVERCOMMIT_FACTOR in arguments:
            try:
                number(arguments, OVERCOMMIT_FACTOR, 1.2, minimum=1.0)
            except ValueError as e:
                raise ConfError(f"scheduler conf: configurations[{k}] ({name}).arguments: {e}") from None
        action_arguments[name] = arguments
    return SchedulerConf(actions=actions, tiers=tuple(tiers), action_arguments=action_arguments)


def load_conf(path: str | None) -> SchedulerConf:
    """The conf in ``path`` (None: :data:`DEFAULT_CONF`)."""
    if path is None:
        return parse_conf(DEFAULT_CONF)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ConfError(f"--scheduler-conf: {path}: {e.strerror or e}") from None
    return parse_conf(text)


def plugin_instances(conf: SchedulerConf) -> list[Plugin]:
    return [PLUGINS[o.name].create(o.arguments) for tier in conf.tiers for o in tier]
