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
``enableXxx`` switches, the values of the arguments caldera reads, and drf's hierarchy
beside proportion in one tier — and a bad entry is one line naming it (with the nearest
known name for a misspelt one).

Every conf Volcano's scheduler takes loads, though caldera does not do everything Volcano
does: a plugin or action Volcano has and caldera does not implement yet is left out of
the session and named in a warning; an argument caldera does not read has no effect (a
warning if Volcano does not read it either: most likely a typo); ``metrics`` (where
Volcano's usage plugin reads node load) has no effect; an ``overcommit-factor`` below 1 is
Volcano's default 1.2, with a warning. Warnings are lines in :attr:`SchedulerConf.warnings`
for the process to print. Argument values may be any YAML scalar (read as text, as
Volcano's plugins read them); a plugin caldera does not implement may take any value.
"""

from __future__ import annotations

import datetime
import difflib
import math
from collections.abc import Collection, Mapping
from typing import Any

import msgspec
import yaml

from batch_scheduler.framework import OTHER_SWITCHES, SWITCHES, Plugin, Tiers
from batch_scheduler.plugins.capacity import ANCESTOR_RECLAIM_LEVEL
from batch_scheduler.registry import (
    ACTIONS,
    PLUGINS,
    REMOVED,
    VOLCANO_ACTION_ARGUMENTS,
    VOLCANO_ACTIONS,
    VOLCANO_CONFIGURATIONS,
    VOLCANO_PLUGIN_ARGUMENTS,
    VOLCANO_PLUGINS,
    VOLCANO_SWITCHES,
)

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

KNOWN_SWITCHES = frozenset(SWITCHES.values()) | OTHER_SWITCHES | VOLCANO_SWITCHES
SECTIONS = ("actions", "tiers", "configurations", "metrics")  # Volcano's SchedulerConfiguration
OVERCOMMIT_FACTOR = "overcommit-factor"
DEFAULT_OVERCOMMIT_FACTOR = "1.2"  # Volcano's, also where a conf gives less than 1


class ConfError(ValueError):
    """A conf that cannot be used; one line naming the entry, the value and what is accepted."""


class PluginOption(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    disabled: frozenset[str] = frozenset()  # switches set to false
    enabled: frozenset[str] = frozenset()  # switches set to true
    arguments: Mapping[str, str] = msgspec.field(default_factory=dict)  # those the plugin reads


class Unimplemented(msgspec.Struct, frozen=True):
    """A Volcano plugin or action the conf names that caldera does not implement yet."""

    kind: str  # "plugin" or "action"
    name: str

    def warning(self) -> str:
        return f'conf {self.kind} "{self.name}" is not implemented by caldera yet; it has no effect'


class SchedulerConf(msgspec.Struct, frozen=True, kw_only=True):
    actions: tuple[str, ...]  # caldera's, in order
    tiers: tuple[tuple[PluginOption, ...], ...]  # caldera's plugins; a tier may be left empty
    action_arguments: Mapping[str, Mapping[str, str]] = msgspec.field(default_factory=dict)
    unimplemented: tuple[Unimplemented, ...] = ()  # in the order the conf names them
    warnings: tuple[str, ...] = ()  # one line each, in conf order

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

    def unimplemented_names(self) -> dict[str, list[str]]:
        """``{"plugins": [...], "actions": [...]}``: what the conf names that has no effect here."""
        return {kind + "s": [u.name for u in self.unimplemented if u.kind == kind] for kind in ("plugin", "action")}

    def new_warnings(self, previous: SchedulerConf) -> list[str]:
        """The warnings ``previous`` did not have (a reload repeats only what is new)."""
        seen = set(previous.warnings)
        return [w for w in self.warnings if w not in seen]


# -- reading values -----------------------------------------------------------------------


def _nearest(name: str, known: Collection[str]) -> str:
    """``did you mean 'x'? `` for the closest known name, or nothing."""
    close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}? " if close else ""


def _text(value: object, where: str) -> str | None:
    """A scalar argument as text (None: no value, so the default); ConfError for a list or mapping."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    raise ConfError(f"scheduler conf: {where}: {value!r} is not a scalar (expected a string or number)")


def _mapping(raw: object, where: str) -> dict[Any, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfError(f"scheduler conf: {where}: expected a mapping of name: value, got {type(raw).__name__}")
    return raw


def _unread(owner: str, argument: str, known: Collection[str]) -> str:
    # Closer than for names: arguments share long prefixes (predicate.…) that say nothing.
    near = difflib.get_close_matches(argument, sorted(known), n=1, cutoff=0.8)
    hint = f' (nearest: "{near[0]}")' if near else ""
    return f'conf {owner}: argument "{argument}" is read by neither caldera nor Volcano; it has no effect{hint}'


def _ancestor_level(arguments: dict[str, str], owner: str, enabled: frozenset[str], warnings: list[str]) -> None:
    """capacity's ancestorReclaimLevel: below 0 it is 0, as in Volcano; without the hierarchy it
    does nothing, as in Volcano. Both with a warning."""
    try:
        level = int(arguments.get(ANCESTOR_RECLAIM_LEVEL, "0"))
    except ValueError:
        return  # the plugin refuses it, naming it
    if level < 0:
        warnings.append(f"conf {owner}: {ANCESTOR_RECLAIM_LEVEL} {level} is below 0; using 0 (only the queues' own "
                        "deserved decide reclaim), as Volcano does")
        arguments[ANCESTOR_RECLAIM_LEVEL] = "0"
    elif level > 0 and "enableHierarchy" not in enabled:
        warnings.append(f"conf {owner}: {ANCESTOR_RECLAIM_LEVEL} {level} has no effect without enableHierarchy: true "
                        "(as in Volcano)")


def _overcommit(arguments: dict[str, str], owner: str, where: str, warnings: list[str]) -> None:
    """Refuse a factor that is not a number; one below 1 is Volcano's default, with a warning."""
    text = arguments.get(OVERCOMMIT_FACTOR)
    if text is None:
        return
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise ConfError(f"scheduler conf: {where}: {OVERCOMMIT_FACTOR}: {text!r} (expected a number >= 1)")
    if value < 1:
        warnings.append(f"conf {owner}: {OVERCOMMIT_FACTOR} {text} is below 1; using {DEFAULT_OVERCOMMIT_FACTOR}, "
                        "as Volcano does")
        arguments[OVERCOMMIT_FACTOR] = DEFAULT_OVERCOMMIT_FACTOR


# -- the sections -------------------------------------------------------------------------


def _actions(raw: object, warnings: list[str]) -> tuple[tuple[str, ...], list[Unimplemented]]:
    if not isinstance(raw, str) or not raw.strip():
        raise ConfError('scheduler conf: actions: expected a comma-separated string, e.g. "enqueue, allocate, backfill"')
    actions: list[str] = []
    missing: list[Unimplemented] = []
    for a in (a.strip() for a in raw.split(",") if a.strip()):
        if a in ACTIONS:
            actions.append(a)
        elif a in VOLCANO_ACTIONS:
            if Unimplemented("action", a) not in missing:  # named once, however often listed
                missing.append(Unimplemented("action", a))
                warnings.append(missing[-1].warning())
        elif REMOVED.get(a) == "action":
            raise ConfError(f"scheduler conf: actions: {a!r} was removed from Volcano in v1.6 and caldera does not have "
                            "it; take it out of actions")
        else:
            raise ConfError(f"scheduler conf: actions: unknown action {a!r} "
                            f"({_nearest(a, ACTIONS.keys() | VOLCANO_ACTIONS)}known: {', '.join(sorted(ACTIONS))})")
    return tuple(actions), missing


def _switches(raw: dict[Any, Any], where: str) -> tuple[frozenset[str], frozenset[str]]:
    """(disabled, enabled): the plugin's ``enableXxx`` keys set to false and to true."""
    disabled: set[str] = set()
    enabled: set[str] = set()
    for key, value in raw.items():
        if key in ("name", "arguments"):
            continue
        if key not in KNOWN_SWITCHES:
            swapped = "enable" + str(key)[len("disable"):]
            if str(key).startswith("disable") and swapped in KNOWN_SWITCHES:
                hint = f"Volcano's disable switches became enable switches: write {swapped}: {str(not value).lower()}"
            else:
                hint = f"{_nearest(str(key), KNOWN_SWITCHES)}expected name, arguments or one of Volcano's enable switches"
            raise ConfError(f"scheduler conf: {where}: unknown field {key!r} ({hint})")
        if not isinstance(value, bool):
            raise ConfError(f"scheduler conf: {where}.{key}: {value!r} is not true or false")
        (enabled if value else disabled).add(key)
    return frozenset(disabled), frozenset(enabled)


def _plugin(raw: object, where: str, warnings: list[str]) -> PluginOption | Unimplemented:
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        raise ConfError(f"scheduler conf: {where}: expected a mapping with a name (e.g. - name: gang)")
    name = raw["name"]
    spec = PLUGINS.get(name)
    if spec is None and name not in VOLCANO_PLUGINS:
        if REMOVED.get(name) == "plugin":
            raise ConfError(f"scheduler conf: {where}: plugin {name!r} was removed from Volcano in v1.6 and caldera does "
                            "not have it; take it out of the tier")
        raise ConfError(f"scheduler conf: {where}: unknown plugin {name!r} "
                        f"({_nearest(name, PLUGINS.keys() | VOLCANO_PLUGINS)}known: {', '.join(sorted(PLUGINS))})")
    where = f"{where} ({name})"
    disabled, enabled = _switches(raw, where)
    given = _mapping(raw.get("arguments"), f"{where}.arguments")
    if spec is None:  # Volcano's, not caldera's: any arguments, no effect
        warnings.append(Unimplemented("plugin", name).warning())
        return Unimplemented("plugin", name)
    arguments: dict[str, str] = {}
    volcano = VOLCANO_PLUGIN_ARGUMENTS.get(name, frozenset())
    for key, value in given.items():
        key = str(key)
        if key in spec.reads or (spec.prefixes and key.startswith(spec.prefixes)):
            text = _text(value, f"{where}.arguments.{key}")
            if text is not None:
                arguments[key] = text
        elif key not in volcano:
            warnings.append(_unread(f'plugin "{name}"', key, spec.reads | volcano))
    _overcommit(arguments, f'plugin "{name}"', f"{where}.arguments", warnings)
    _ancestor_level(arguments, f'plugin "{name}"', enabled, warnings)
    try:
        spec.create(arguments)  # checks argument values
    except ValueError as e:
        raise ConfError(f"scheduler conf: {where}.arguments: {e}") from None
    return PluginOption(name=name, disabled=disabled, enabled=enabled, arguments=arguments)


def _tiers(raw: object, warnings: list[str]) -> tuple[tuple[tuple[PluginOption, ...], ...], list[Unimplemented]]:
    if not isinstance(raw, list) or not raw:
        raise ConfError("scheduler conf: tiers: expected a list of tiers, each with plugins")
    tiers: list[tuple[PluginOption, ...]] = []
    missing: list[Unimplemented] = []
    seen: set[str] = set()
    for i, tier in enumerate(raw):
        if not isinstance(tier, dict) or not isinstance(tier.get("plugins"), list):
            raise ConfError(f"scheduler conf: tiers[{i}]: expected a mapping with a list of plugins")
        entries = [_plugin(p, f"tiers[{i}].plugins[{j}]", warnings) for j, p in enumerate(tier["plugins"])]
        for e in entries:
            if e.name in seen:
                raise ConfError(f"scheduler conf: tiers[{i}]: plugin {e.name!r} appears twice")
            seen.add(e.name)
        options = tuple(e for e in entries if isinstance(e, PluginOption))
        missing += [e for e in entries if isinstance(e, Unimplemented)]
        names = {o.name for o in options}
        drf = next((o for o in options if o.name == "drf"), None)
        if drf is not None and "enableHierarchy" in drf.enabled and "proportion" in names:
            raise ConfError(f"scheduler conf: tiers[{i}]: drf with enableHierarchy: true cannot share a tier with "
                            "proportion (both decide queue shares); move one to another tier")
        tiers.append(options)
    return tuple(tiers), missing


def _configurations(raw: object, warnings: list[str]) -> dict[str, dict[str, str]]:
    if raw is not None and not isinstance(raw, list):
        raise ConfError("scheduler conf: configurations: expected a list of entries, each with a name and arguments")
    action_arguments: dict[str, dict[str, str]] = {}
    for k, entry in enumerate(raw or []):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise ConfError(f"scheduler conf: configurations[{k}]: expected a mapping with a name and arguments")
        name = entry["name"]
        where = f"configurations[{k}] ({name})"
        given = _mapping(entry.get("arguments"), f"{where}.arguments")
        spec = ACTIONS.get(name)
        if spec is None:
            if name in VOLCANO_ACTIONS or name in VOLCANO_CONFIGURATIONS:
                continue  # Volcano's, not caldera's: no effect
            raise ConfError(f"scheduler conf: configurations[{k}]: unknown action {name!r} "
                            f"({_nearest(name, ACTIONS.keys() | VOLCANO_ACTIONS)}known: {', '.join(sorted(ACTIONS))})")
        arguments: dict[str, str] = {}
        volcano = VOLCANO_ACTION_ARGUMENTS.get(name, frozenset())
        for key, value in given.items():
            key = str(key)
            if key in spec.arguments:
                text = _text(value, f"{where}.arguments.{key}")
                if text is not None:
                    arguments[key] = text
            elif key not in volcano:
                warnings.append(_unread(f"configurations[{k}] ({name})", key, spec.arguments | volcano))
        _overcommit(arguments, where, f"{where}.arguments", warnings)
        for key, meaning in NOT_HONOURED.get(name, {}).items():
            if arguments.get(key, "").lower() == "true":
                warnings.append(f"conf {where}: {key} true is not honoured by caldera yet ({meaning})")
        action_arguments[name] = arguments
    return action_arguments


NOT_HONOURED: Mapping[str, Mapping[str, str]] = {
    "preempt": {"enableTopologyAwarePreemption": "Volcano's normal preemption runs instead of "
                                                 "kube-scheduler-style candidate selection"},
}
"""Action arguments that change placement in Volcano and that caldera accepts without acting on them."""


def parse_conf(text: str) -> SchedulerConf:
    """Read and check a conf; raises :class:`ConfError` with one line on anything wrong."""
    try:
        raw: Any = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise ConfError(f"scheduler conf: invalid YAML: {' '.join(str(e).split())}") from None
    if not isinstance(raw, dict):
        raise ConfError("scheduler conf: expected a mapping with actions and tiers")
    for key in raw:
        if key not in SECTIONS:
            raise ConfError(f"scheduler conf: unknown field {key!r} ({_nearest(str(key), SECTIONS)}"
                            f"expected {', '.join(SECTIONS)})")
    warnings: list[str] = []
    actions, missing_actions = _actions(raw.get("actions"), warnings)
    tiers, missing_plugins = _tiers(raw.get("tiers"), warnings)
    action_arguments = _configurations(raw.get("configurations"), warnings)
    _mapping(raw.get("metrics"), "metrics")  # where Volcano's usage plugin reads node load: no effect here
    return SchedulerConf(actions=actions, tiers=tiers, action_arguments=action_arguments,
                         unimplemented=(*missing_actions, *missing_plugins), warnings=tuple(warnings))


def load_conf(path: str | None, flag: str = "--scheduler-conf") -> SchedulerConf:
    """The conf in ``path`` (None: :data:`DEFAULT_CONF`); ``flag`` names it in the error."""
    if path is None:
        return parse_conf(DEFAULT_CONF)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ConfError(f"{flag}: {path}: {e.strerror or e}") from None
    return parse_conf(text)


def plugin_instances(conf: SchedulerConf) -> list[Plugin]:
    return [PLUGINS[o.name].create(o.arguments) for tier in conf.tiers for o in tier]
