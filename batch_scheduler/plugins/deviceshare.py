"""deviceshare: GPU cards shared between pods — Volcano's deviceshare plugin, with the card pick it leaves undone.

Every pod asking for cards (gpushare's ``volcano.sh/gpu-memory``/``gpu-number``, HAMi vGPU's
``volcano.sh/vgpu-*``, whole ``nvidia.com/gpu``, a share in thousandths) is checked card by
card by the placement core (``cluster.nodeview.devices``), whether or not this plugin is in
the conf and whichever ``*Enable`` flag is set: a kind left to node totals could put one pod
on two halves of different cards. What the plugin's arguments change:

- ``deviceshare.SchedulePolicy``: which card a pod gets on its node — ``binpack`` (the most
  used that fits), ``spread`` (the least used), caldera's ``best-fit`` (the one left
  tightest), caldera's ``fgd`` (Fragmentation Gradient Descent, ``cluster/nodeview/fgd_score.py``:
  node and card where the expected fragment of the session's typical pods grows least, for
  shares in thousandths; memory shares take the tightest card), or unset: Volcano 1.14's
  order (gpushare lowest index first, vGPU highest first). Volcano 1.14 scores nodes by the
  policy but never picks the card by it (master does, #5252); caldera picks by it.
- ``deviceshare.ScheduleWeight`` (0): the node score, as Volcano's vGPU score — over the
  cards the pod would take, Σ 100 × used memory ÷ memory after it (binpack) or Σ 100 per card
  it would be alone on (spread), ⌊Σ + 0.5⌋ × weight; with 0, none (Volcano #5643). With
  ``fgd`` the score is FGD's ⌊100·σ(Δ/1000)⌋ × the weight (at least 1: FGD is nothing without
  its node score), for every pod, CPU pods too.
- caldera's FGD arguments, only with ``SchedulePolicy: fgd`` (refused otherwise):
  ``deviceshare.FGDTypicalPods`` — the typical pods, given (``cpu=4,gpus=1,milli=500,share=0.6;
  cpu=8,gpus=8,share=0.4``, ``cluster.nodeview.fgd_score.parse_typical_pods``), else learned from
  the last ``deviceshare.FGDWindow`` (2000) pods the sessions showed it, the shapes covering
  ``deviceshare.FGDPopularityThreshold`` (95) % of them, CPU pods among them unless
  ``deviceshare.FGDIncludeCPUPods`` is false.
- ``deviceshare.GPUSharingEnable`` with ``GPUNumberEnable``, or ``VGPUEnable`` with either:
  refused at start, as Volcano's scheduler exits.
- ``deviceshare.NodeLockEnable``: accepted, no effect — the binder's compare-and-set already
  makes a node's cards one writer's at a time.

Not honoured yet (named when the conf loads): MIG geometries (``KnownGeometriesCMName``),
Ascend NPUs, the pod annotations ``nvidia.com/use-gputype``, ``nvidia.com/nouse-gputype`` and
``volcano.sh/vgpu-mode``, and ``GPUExclusiveRules``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Self

import numpy as np

from batch_scheduler.arguments import Arguments, flag, number, weight
from batch_scheduler.framework import PluginBase, SessionView
from cluster.model.devices import Sharing
from cluster.nodeview.devices import CardPolicy, CardRows, card_need
from cluster.nodeview.fgd_score import FgdConfig, FgdScore, parse_typical_pods
from cluster.nodeview.profile import Placing, Rows, Values
from cluster.nodeview.table import NodeTable

SHARING, NUMBER, VGPU = "deviceshare.GPUSharingEnable", "deviceshare.GPUNumberEnable", "deviceshare.VGPUEnable"
POLICY, WEIGHT = "deviceshare.SchedulePolicy", "deviceshare.ScheduleWeight"
FGD_TYPICAL, FGD_WINDOW = "deviceshare.FGDTypicalPods", "deviceshare.FGDWindow"
FGD_POPULARITY, FGD_CPU = "deviceshare.FGDPopularityThreshold", "deviceshare.FGDIncludeCPUPods"
FGD_ARGUMENTS = (FGD_TYPICAL, FGD_WINDOW, FGD_POPULARITY, FGD_CPU)
ACCEPTED = frozenset(
    {
        "deviceshare.NodeLockEnable",
        "deviceshare.KnownGeometriesCMName",
        "deviceshare.KnownGeometriesCMNamespace",
        "deviceshare.AscendMindClusterVNPUEnable",
        "deviceshare.AscendHAMiVNPUEnable",
        "deviceshare.GPUExclusiveRules",
    }
)


class DeviceShareArguments(Arguments, frozen=True, kw_only=True):
    reads = frozenset({SHARING, NUMBER, VGPU, POLICY, WEIGHT, *FGD_ARGUMENTS}) | ACCEPTED
    unhonoured = (
        "MIG geometries (deviceshare.KnownGeometriesCMName), Ascend NPUs, deviceshare.GPUExclusiveRules and the "
        "pod annotations nvidia.com/use-gputype, nvidia.com/nouse-gputype and volcano.sh/vgpu-mode are not "
        "honoured yet"
    )
    policy: CardPolicy = CardPolicy.VOLCANO
    weight: int = 0
    fgd: FgdConfig = FgdConfig()

    @classmethod
    def decode(cls, arguments: Mapping[str, str]) -> Self:
        sharing, by_number, vgpu = (flag(arguments, name, False) for name in (SHARING, NUMBER, VGPU))
        if sharing and by_number:
            raise ValueError(f"{SHARING} and {NUMBER} are both true (Volcano's scheduler refuses to start; set one)")
        if vgpu and (sharing or by_number):
            raise ValueError(f"{VGPU} with {SHARING if sharing else NUMBER} (Volcano's scheduler refuses to start)")
        text = arguments.get(POLICY, "").strip()
        try:
            policy = CardPolicy(text)
        except ValueError:
            accepted = ", ".join(p.value for p in CardPolicy if p.value)
            raise ValueError(f"{POLICY}: {text!r} (expected {accepted}, or unset)") from None
        given = [name for name in FGD_ARGUMENTS if name in arguments]
        if given and policy is not CardPolicy.FGD:
            raise ValueError(f"{given[0]}: set, but {POLICY} is {text!r} (FGD's arguments need {POLICY}: fgd)")
        default = FgdConfig()
        popularity = number(arguments, FGD_POPULARITY, default.popularity)
        if not 0 < popularity <= 100:
            raise ValueError(f"{FGD_POPULARITY}: {arguments[FGD_POPULARITY]!r} (expected a percentage in (0, 100])")
        window = number(arguments, FGD_WINDOW, default.window, minimum=1)
        if window != int(window):
            raise ValueError(f"{FGD_WINDOW}: {arguments[FGD_WINDOW]!r} (expected a whole number of pods >= 1)")
        fgd = FgdConfig(
            popularity=popularity,
            include_cpu=flag(arguments, FGD_CPU, default.include_cpu),
            window=int(window),
            typical=parse_typical_pods(arguments[FGD_TYPICAL], FGD_TYPICAL) if FGD_TYPICAL in arguments else (),
        )
        return cls(policy=policy, weight=weight(arguments, WEIGHT, 0), fgd=fgd)


class DeviceSharePlugin(PluginBase[DeviceShareArguments]):
    def __init__(self, name: str, args: DeviceShareArguments) -> None:
        super().__init__(name, args)
        self.fgd = FgdScore.of(args.fgd, weight=max(1, args.weight)) if args.policy is CardPolicy.FGD else None

    def open(self, ssn: SessionView) -> None:
        super().open(ssn)
        if self.fgd is not None:  # the typical pods: this session's, pending and placed
            self.fgd.observe([(t.pod, t.request) for job in ssn.jobs.values() for t in job.tasks.values()])

    def score(self, table: NodeTable, placing: Placing, rows: Rows | None) -> Values:
        if self.fgd is not None:
            return self.fgd.score(table, placing, rows)
        n = len(table)
        count = n if rows is None else len(rows)
        need = card_need(placing.pod, placing.request)
        policy = self.args.policy
        if (
            self.args.weight == 0
            or need is None
            or need.sharing is not Sharing.VGPU
            or policy
            not in (
                CardPolicy.BINPACK,
                CardPolicy.SPREAD,
            )
        ):
            return np.zeros(count)
        cards = CardRows(table)
        total = np.zeros(n)
        for ask in need.asks:
            usable = cards.usable(ask)
            # the cards the pod would take: the policy's first ``count`` usable ones
            key = -cards.used if policy is CardPolicy.BINPACK else cards.slots_used
            order = np.argsort(np.where(usable, key, np.iinfo(np.int64).max), axis=0, kind="stable")[: ask.count]
            taken = np.take_along_axis(usable, order, axis=0)
            if policy is CardPolicy.BINPACK:
                cap = np.take_along_axis(cards.cap, order, axis=0)
                used = np.take_along_axis(cards.used, order, axis=0)
                amount = cap * ask.percentage // 100 if ask.percentage is not None else ask.amount
                part = np.where(taken & (cap > 0), 100.0 * (used + amount) / np.maximum(cap, 1), 0.0)
            else:
                idle = np.take_along_axis(cards.slots_used, order, axis=0) == 0
                part = np.where(taken & idle, 100.0, 0.0)
            total += part.sum(axis=0)
        values = np.floor(total + 0.5) * self.args.weight
        return values if rows is None else values[rows]
