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
Volcano's plugins read them), decoded into each plugin's typed arguments here, once; a
plugin caldera does not implement may take any value.

What caldera implements comes in as a value, the :class:`~batch_scheduler.framework.Registry`
(:func:`batch_scheduler.registry.default_registry`), which the conf keeps: each session
builds its plugins from it and runs its actions from it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
import yaml

from batch_scheduler.arguments import Arguments
from batch_scheduler.conf_values import (
    OVERCOMMIT_FACTOR,
    ancestor_level,
    mapping,
    nearest,
    overcommit_factor,
    text_value,
    unread,
)
from batch_scheduler.conf_values import (
    ConfError as ConfError,  # the conf's one error, for its callers
)
from batch_scheduler.framework import (
    OTHER_SWITCHES,
    SWITCHES,
    ActionSpec,
    PluginSpec,
    Registry,
)
from batch_scheduler.plugin_set import PluginSet
from batch_scheduler.volcano_names import (
    REMOVED,
    VOLCANO_ACTION_ARGUMENTS,
    VOLCANO_ACTIONS,
    VOLCANO_CONFIGURATIONS,
    VOLCANO_PLUGIN_ARGUMENTS,
    VOLCANO_PLUGINS,
    VOLCANO_SWITCHES,
)
from cluster.model import yaml_input
from cluster.nodeview.devices import CardPolicy

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


class PluginOption(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    disabled: frozenset[str] = frozenset()  # switches set to false
    enabled: frozenset[str] = frozenset()  # switches set to true
    arguments: Mapping[str, str] = msgspec.field(default_factory=dict)  # those the plugin reads, as the conf gives them
    decoded: Arguments  # the plugin's typed arguments, decoded from ``arguments`` when the conf loaded


class Unimplemented(msgspec.Struct, frozen=True):
    """A Volcano plugin or action the conf names that caldera does not implement yet."""

    kind: str  # "plugin" or "action"
    name: str

    def warning(self) -> str:
        return f'conf {self.kind} "{self.name}" is not implemented by caldera yet; it has no effect'


class SchedulerConf(msgspec.Struct, frozen=True, kw_only=True):
    actions: tuple[str, ...]  # caldera's, in order
    tiers: tuple[tuple[PluginOption, ...], ...]  # caldera's plugins; a tier may be left empty
    registry: Registry  # what the names stand for
    action_arguments: Mapping[str, Mapping[str, str]] = msgspec.field(default_factory=dict)
    unimplemented: tuple[Unimplemented, ...] = ()  # in the order the conf names them
    warnings: tuple[str, ...] = ()  # one line each, in conf order

    def build(self) -> PluginSet:
        """Fresh plugin instances for one session, sorted into the extension points."""
        plugins = self.registry.plugins
        return PluginSet(
            [[(plugins[o.name].create(o.name, o.decoded), o.disabled) for o in tier] for tier in self.tiers]
        )

    def argument(self, action: str, name: str) -> str | None:
        return self.action_arguments.get(action, {}).get(name)

    def card_policy(self) -> CardPolicy:
        """How GPU cards are picked on a node: the deviceshare plugin's ``SchedulePolicy``, else Volcano's order."""
        for tier in self.tiers:
            for o in tier:
                policy = getattr(o.decoded, "policy", None) if o.name == "deviceshare" else None
                if isinstance(policy, CardPolicy):
                    return policy
        return CardPolicy.VOLCANO

    def has_plugin(self, name: str) -> bool:
        return any(o.name == name for tier in self.tiers for o in tier)

    def unimplemented_names(self) -> dict[str, list[str]]:
        """``{"plugins": [...], "actions": [...]}``: what the conf names that has no effect here."""
        return {kind + "s": [u.name for u in self.unimplemented if u.kind == kind] for kind in ("plugin", "action")}

    def new_warnings(self, previous: SchedulerConf) -> list[str]:
        """The warnings ``previous`` did not have (a reload repeats only what is new)."""
        seen = set(previous.warnings)
        return [w for w in self.warnings if w not in seen]


# -- the sections -------------------------------------------------------------------------


def _actions(
    raw: object, known: Mapping[str, ActionSpec], warnings: list[str]
) -> tuple[tuple[str, ...], list[Unimplemented]]:
    if not isinstance(raw, str) or not raw.strip():
        raise ConfError(
            'scheduler conf: actions: expected a comma-separated string, e.g. "enqueue, allocate, backfill"'
        )
    actions: list[str] = []
    missing: list[Unimplemented] = []
    for a in (a.strip() for a in raw.split(",") if a.strip()):
        if a in known:
            actions.append(a)
        elif a in VOLCANO_ACTIONS:
            if Unimplemented("action", a) not in missing:  # named once, however often listed
                missing.append(Unimplemented("action", a))
                warnings.append(missing[-1].warning())
        elif REMOVED.get(a) == "action":
            raise ConfError(
                f"scheduler conf: actions: {a!r} was removed from Volcano in v1.6 and caldera does not have "
                "it; take it out of actions"
            )
        else:
            raise ConfError(
                f"scheduler conf: actions: unknown action {a!r} "
                f"({nearest(a, known.keys() | VOLCANO_ACTIONS)}known: {', '.join(sorted(known))})"
            )
    return tuple(actions), missing


def _switches(raw: dict[Any, Any], where: str) -> tuple[frozenset[str], frozenset[str]]:
    """(disabled, enabled): the plugin's ``enableXxx`` keys set to false and to true."""
    disabled: set[str] = set()
    enabled: set[str] = set()
    for key, value in raw.items():
        if key in ("name", "arguments"):
            continue
        if key not in KNOWN_SWITCHES:
            swapped = "enable" + str(key)[len("disable") :]
            if str(key).startswith("disable") and swapped in KNOWN_SWITCHES:
                hint = f"Volcano's disable switches became enable switches: write {swapped}: {str(not value).lower()}"
            else:
                hint = (
                    f"{nearest(str(key), KNOWN_SWITCHES)}expected name, arguments or one of Volcano's enable switches"
                )
            raise ConfError(f"scheduler conf: {where}: unknown field {key!r} ({hint})")
        if not isinstance(value, bool):
            raise ConfError(f"scheduler conf: {where}.{key}: {value!r} is not true or false")
        (enabled if value else disabled).add(key)
    return frozenset(disabled), frozenset(enabled)


def _plugin(
    raw: object, where: str, known: Mapping[str, PluginSpec], warnings: list[str]
) -> PluginOption | Unimplemented:
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        raise ConfError(f"scheduler conf: {where}: expected a mapping with a name (e.g. - name: gang)")
    name = raw["name"]
    spec = known.get(name)
    if spec is None and name not in VOLCANO_PLUGINS:
        if REMOVED.get(name) == "plugin":
            raise ConfError(
                f"scheduler conf: {where}: plugin {name!r} was removed from Volcano in v1.6 and caldera does "
                "not have it; take it out of the tier"
            )
        raise ConfError(
            f"scheduler conf: {where}: unknown plugin {name!r} "
            f"({nearest(name, known.keys() | VOLCANO_PLUGINS)}known: {', '.join(sorted(known))})"
        )
    where = f"{where} ({name})"
    disabled, enabled = _switches(raw, where)
    given = mapping(raw.get("arguments"), f"{where}.arguments")
    if spec is None:  # Volcano's, not caldera's: any arguments, no effect
        warnings.append(Unimplemented("plugin", name).warning())
        return Unimplemented("plugin", name)
    arguments: dict[str, str] = {}
    volcano = VOLCANO_PLUGIN_ARGUMENTS.get(name, frozenset())
    reads, prefixes = spec.arguments.reads, spec.arguments.prefixes
    for key, value in given.items():
        key = str(key)
        if key in reads or (prefixes and key.startswith(prefixes)):
            text = text_value(value, f"{where}.arguments.{key}")
            if text is not None:
                arguments[key] = text
        elif key not in volcano:
            warnings.append(unread(f'plugin "{name}"', key, reads | volcano))
    overcommit_factor(arguments, f'plugin "{name}"', f"{where}.arguments", warnings)
    ancestor_level(arguments, f'plugin "{name}"', enabled, warnings)
    try:
        decoded = spec.arguments.load(name, arguments)
    except ValueError as e:
        raise ConfError(f"scheduler conf: {where}.arguments: {e}") from None
    if spec.arguments.unhonoured:
        warnings.append(f'conf plugin "{name}": {spec.arguments.unhonoured}')
    return PluginOption(name=name, disabled=disabled, enabled=enabled, arguments=arguments, decoded=decoded)


def _tiers(
    raw: object, known: Mapping[str, PluginSpec], warnings: list[str]
) -> tuple[tuple[tuple[PluginOption, ...], ...], list[Unimplemented]]:
    if not isinstance(raw, list) or not raw:
        raise ConfError("scheduler conf: tiers: expected a list of tiers, each with plugins")
    tiers: list[tuple[PluginOption, ...]] = []
    missing: list[Unimplemented] = []
    seen: set[str] = set()
    for i, tier in enumerate(raw):
        if not isinstance(tier, dict) or not isinstance(tier.get("plugins"), list):
            raise ConfError(f"scheduler conf: tiers[{i}]: expected a mapping with a list of plugins")
        entries = [_plugin(p, f"tiers[{i}].plugins[{j}]", known, warnings) for j, p in enumerate(tier["plugins"])]
        for e in entries:
            if e.name in seen:
                raise ConfError(f"scheduler conf: tiers[{i}]: plugin {e.name!r} appears twice")
            seen.add(e.name)
        options = tuple(e for e in entries if isinstance(e, PluginOption))
        missing += [e for e in entries if isinstance(e, Unimplemented)]
        names = {o.name for o in options}
        drf = next((o for o in options if o.name == "drf"), None)
        if drf is not None and "enableHierarchy" in drf.enabled and "proportion" in names:
            raise ConfError(
                f"scheduler conf: tiers[{i}]: drf with enableHierarchy: true cannot share a tier with "
                "proportion (both decide queue shares); move one to another tier"
            )
        tiers.append(options)
    return tuple(tiers), missing


def _configurations(raw: object, known: Mapping[str, ActionSpec], warnings: list[str]) -> dict[str, dict[str, str]]:
    if raw is not None and not isinstance(raw, list):
        raise ConfError("scheduler conf: configurations: expected a list of entries, each with a name and arguments")
    action_arguments: dict[str, dict[str, str]] = {}
    for k, entry in enumerate(raw or []):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise ConfError(f"scheduler conf: configurations[{k}]: expected a mapping with a name and arguments")
        name = entry["name"]
        where = f"configurations[{k}] ({name})"
        given = mapping(entry.get("arguments"), f"{where}.arguments")
        spec = known.get(name)
        if spec is None:
            if name in VOLCANO_ACTIONS or name in VOLCANO_CONFIGURATIONS:
                continue  # Volcano's, not caldera's: no effect
            raise ConfError(
                f"scheduler conf: configurations[{k}]: unknown action {name!r} "
                f"({nearest(name, known.keys() | VOLCANO_ACTIONS)}known: {', '.join(sorted(known))})"
            )
        arguments: dict[str, str] = {}
        volcano = VOLCANO_ACTION_ARGUMENTS.get(name, frozenset())
        for key, value in given.items():
            key = str(key)
            if key in spec.arguments:
                text = text_value(value, f"{where}.arguments.{key}")
                if text is not None:
                    arguments[key] = text
            elif key not in volcano:
                warnings.append(unread(f"configurations[{k}] ({name})", key, spec.arguments | volcano))
        overcommit_factor(arguments, where, f"{where}.arguments", warnings)
        for key, meaning in NOT_HONOURED.get(name, {}).items():
            if arguments.get(key, "").lower() == "true":
                warnings.append(f"conf {where}: {key} true is not honoured by caldera yet ({meaning})")
        action_arguments[name] = arguments
    return action_arguments


NOT_HONOURED: Mapping[str, Mapping[str, str]] = {
    "preempt": {
        "enableTopologyAwarePreemption": "Volcano's normal preemption runs instead of "
        "kube-scheduler-style candidate selection"
    },
}
"""Action arguments that change placement in Volcano and that caldera accepts without acting on them."""


def _inherit_factor(
    tiers: tuple[tuple[PluginOption, ...], ...],
    action_arguments: Mapping[str, Mapping[str, str]],
    known: Mapping[str, PluginSpec],
) -> tuple[tuple[PluginOption, ...], ...]:
    """overcommit takes enqueue's ``overcommit-factor`` (where older Volcano confs put it) unless it
    states its own (the factor is checked already: it decodes)."""
    factor = action_arguments.get("enqueue", {}).get(OVERCOMMIT_FACTOR)
    if factor is None:
        return tiers

    def inherit(o: PluginOption) -> PluginOption:
        if o.name != "overcommit" or OVERCOMMIT_FACTOR in o.arguments:
            return o
        return msgspec.structs.replace(
            o, decoded=known[o.name].arguments.load(o.name, {**o.arguments, OVERCOMMIT_FACTOR: factor})
        )

    return tuple(tuple(inherit(o) for o in tier) for tier in tiers)


def parse_conf(text: str, registry: Registry) -> SchedulerConf:
    """Read and check a conf against ``registry``; raises :class:`ConfError` with one line on anything wrong."""
    try:
        raw: Any = yaml_input.load(text)
    except yaml.YAMLError as e:
        raise ConfError(f"scheduler conf: invalid YAML: {' '.join(str(e).split())}") from None
    if not isinstance(raw, dict):
        raise ConfError("scheduler conf: expected a mapping with actions and tiers")
    for key in raw:
        if key not in SECTIONS:
            raise ConfError(
                f"scheduler conf: unknown field {key!r} ({nearest(str(key), SECTIONS)}expected {', '.join(SECTIONS)})"
            )
    warnings: list[str] = []
    actions, missing_actions = _actions(raw.get("actions"), registry.actions, warnings)
    tiers, missing_plugins = _tiers(raw.get("tiers"), registry.plugins, warnings)
    action_arguments = _configurations(raw.get("configurations"), registry.actions, warnings)
    mapping(raw.get("metrics"), "metrics")  # where Volcano's usage plugin reads node load: no effect here
    return SchedulerConf(
        actions=actions,
        tiers=_inherit_factor(tiers, action_arguments, registry.plugins),
        registry=registry,
        action_arguments=action_arguments,
        unimplemented=(*missing_actions, *missing_plugins),
        warnings=tuple(warnings),
    )


def load_conf(path: str | None, registry: Registry, flag: str = "--scheduler-conf") -> SchedulerConf:
    """The conf in ``path`` (None: :data:`DEFAULT_CONF`), checked against ``registry``; ``flag`` names it in the error."""
    if path is None:
        return parse_conf(DEFAULT_CONF, registry)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ConfError(f"{flag}: {path}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise ConfError(f"{flag}: {path}: not UTF-8 text (byte {e.start}; expected a scheduler conf YAML)") from None
    return parse_conf(text, registry)
