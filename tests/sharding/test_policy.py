"""The band policy (sharding/policy.py, DESIGN.md §5): properties over random clusters, then
flapping, dwell, MIN_NODES borrowing and the event-trigger signature as worked examples."""

from __future__ import annotations

import math

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sharding.config import (
    DEFAULT_SCHEDULER_CONFIGS,
    SchedulerType,
    ShardConfig,
    parse_scheduler_configs,
)
from sharding.policy import (
    NO_OWNER,
    Assignment,
    Hysteresis,
    NodeState,
    assign,
    band_signature,
)

DEFAULTS = parse_scheduler_configs(DEFAULT_SCHEDULER_CONFIGS)
VOLCANO, AGENT = 0, 1
PROPERTY = settings(max_examples=200, deadline=None)


# ----------------------------------------------------------------------------- builders


def band(
    name: str, lo: float, hi: float, *, min_nodes: int = 0, max_nodes: int = 100, prefer_warmup: bool = False
) -> ShardConfig:
    return ShardConfig(
        name=name,
        type=SchedulerType.VOLCANO,
        min_util=lo,
        max_util=hi,
        prefer_warmup=prefer_warmup,
        min_nodes=min_nodes,
        max_nodes=max_nodes,
    )


def state(
    util: list[float],
    owner: list[int] | None = None,
    *,
    warmup: list[bool] | None = None,
    outside_since: list[float] | None = None,
) -> NodeState:
    n = len(util)
    return NodeState(
        util=np.array(util, dtype=np.float64),
        warmup=np.array(warmup if warmup is not None else [False] * n, dtype=np.bool_),
        owner=np.array(owner if owner is not None else [NO_OWNER] * n, dtype=np.int64),
        outside_since=np.array(outside_since if outside_since is not None else [math.nan] * n, dtype=np.float64),
    )


def follow(previous: Assignment, util: np.ndarray, warmup: np.ndarray) -> NodeState:
    """The next sync's input: new utilization, the previous result's owners and clocks."""
    return NodeState(util=util, warmup=warmup, owner=previous.owner.copy(), outside_since=previous.outside_since.copy())


# ----------------------------------------------------------------------------- the spec, independently


def inside(util: np.ndarray, c: ShardConfig, margin: float = 0.0) -> np.ndarray:
    """In the band widened by ``margin``; a band reaching 1.0 is open above (over-committed nodes)."""
    hi = c.max_util + margin if c.max_util < 1.0 else math.inf
    return (util >= c.min_util - margin) & (util <= hi)


def entering(util: np.ndarray, c: ShardConfig, margin: float) -> np.ndarray:
    """Where a node that is not a member may join: inside the band by ``margin``, except at
    the scale's ends (MIN_UTIL 0, MAX_UTIL 1), where there is nothing beyond to flap with."""
    lo = c.min_util + margin if c.min_util > 0.0 else -math.inf
    hi = c.max_util - margin if c.max_util < 1.0 else math.inf
    return (util >= lo) & (util <= hi)


def retained_by(s: NodeState, ci: int, c: ShardConfig, now: float, h: Hysteresis) -> np.ndarray:
    """Current members outside the band that hysteresis lets stay: within the margin, and
    first seen outside (outside_since, or now when unset) less than ``dwell`` ago."""
    since = np.where(np.isnan(s.outside_since), now, s.outside_since)
    return (s.owner == ci) & ~inside(s.util, c) & inside(s.util, c, h.margin) & (now - since < h.dwell)


def eligible_for(s: NodeState, ci: int, c: ShardConfig, now: float, h: Hysteresis) -> np.ndarray:
    """Band-rule candidates of config ``ci`` before earlier configs have taken anything: its
    members inside the band or retained by hysteresis, and any node inside the entry band."""
    members = s.owner == ci
    return (members & inside(s.util, c)) | retained_by(s, ci, c, now, h) | entering(s.util, c, h.margin)


def rank(s: NodeState, ci: int, c: ShardConfig, i: int) -> tuple[bool, bool, float]:
    """The docstring's order, higher first: warmup (if PREFER_WARMUP), current member, utilization."""
    return (bool(s.warmup[i]) and c.prefer_warmup, bool(s.owner[i] == ci), float(s.util[i]))


def passed_over(s: NodeState, a: Assignment, ci: int, c: ShardConfig, now: float, h: Hysteresis) -> np.ndarray:
    """Nodes that were band-rule candidates of ``ci`` when its turn came but were not taken.

    A node unowned in the result was never taken by the band rule (borrowing only adds
    owners), and one a later config holds by the band rule (not borrowed) was still free
    after ``ci``'s turn; either way nothing earlier took it, so it was a candidate of ``ci``."""
    free_after = (a.owner == NO_OWNER) | ((a.owner > ci) & ~a.borrowed)
    return eligible_for(s, ci, c, now, h) & free_after


def band_members(a: Assignment, ci: int) -> np.ndarray:
    return (a.owner == ci) & ~a.borrowed


# ----------------------------------------------------------------------------- random clusters

BOUND = st.one_of(st.floats(0.0, 1.0), st.integers(0, 100).map(lambda k: k / 100))  # exact edges and ties too


@st.composite
def random_configs(draw: st.DrawFn) -> list[ShardConfig]:
    configs = []
    for i in range(draw(st.integers(1, 3))):
        lo, hi = sorted((draw(BOUND), draw(BOUND)))
        min_nodes = draw(st.integers(0, 30))
        max_nodes = min_nodes + draw(st.integers(0, 150))
        configs.append(
            ShardConfig(
                name=f"s{i}",
                type=draw(st.sampled_from(SchedulerType)),
                min_util=lo,
                max_util=hi,
                prefer_warmup=draw(st.booleans()),
                min_nodes=min_nodes,
                max_nodes=max_nodes,
            )
        )
    return configs


Case = tuple[NodeState, list[ShardConfig], float, Hysteresis]


@st.composite
def cases(draw: st.DrawFn) -> Case:
    """A random cluster. The per-node columns are decoded from one byte string, which is
    far cheaper to generate than 300-element arrays of strategies and still shrinks (toward
    zero bytes: utilization 0, no warmup, unowned, outside_since NaN)."""
    configs = draw(st.one_of(random_configs(), st.just(DEFAULTS)))
    n = draw(st.integers(0, 300))
    raw = np.frombuffer(draw(st.binary(min_size=5 * n, max_size=5 * n)), dtype=np.uint8).reshape(5, n)
    word = raw[0].astype(np.int64) << 8 | raw[1]
    # Odd words: a multiple of 0.01 in [0, 1.2], to hit band edges and make ties; even: any value.
    util = np.where(word & 1, (word >> 1) % 121 / 100, (word >> 1) / 32767 * 1.2)
    now = draw(st.floats(0.0, 1e6))
    ago = np.where(raw[4] < 64, math.nan, (raw[4].astype(np.float64) - 64) / 191 * 1000.0)
    s = NodeState(
        util=util,
        warmup=(raw[2] & 1).astype(np.bool_),
        owner=raw[3].astype(np.int64) % (len(configs) + 1) - 1,
        outside_since=np.minimum(now - ago, now),
    )
    h = Hysteresis(margin=draw(st.floats(0.0, 0.1)), dwell=draw(st.floats(0.0, 600.0)))
    return s, configs, now, h


def counts(a: Assignment, configs: list[ShardConfig]) -> np.ndarray:
    return np.bincount(a.owner[a.owner >= 0], minlength=len(configs))


# ----------------------------------------------------------------------------- properties


@PROPERTY
@given(cases())
def test_every_node_has_at_most_one_valid_owner(case: Case) -> None:
    """One owner value per node, in [-1, len(configs)); only owned nodes are borrowed."""
    s, configs, now, h = case
    a = assign(s, configs, now, h)
    n = len(s.util)
    assert a.owner.shape == a.borrowed.shape == a.outside_since.shape == (n,)
    assert np.issubdtype(a.owner.dtype, np.integer)
    assert ((a.owner >= NO_OWNER) & (a.owner < len(configs))).all()
    assert not (a.borrowed & (a.owner == NO_OWNER)).any()


@PROPERTY
@given(cases())
def test_owned_nodes_lie_in_their_band_unless_borrowed(case: Case) -> None:
    """A node held by the band rule (not borrowed) lies in its owner's band widened by the
    margin; one that was not already a member lies inside the entry band (inside the band
    by the margin, except at the scale's ends)."""
    s, configs, now, h = case
    a = assign(s, configs, now, h)
    for ci, c in enumerate(configs):
        held = band_members(a, ci)
        assert inside(s.util[held], c, h.margin).all()
        joined = held & (s.owner != ci)
        assert entering(s.util[joined], c, h.margin).all()


@PROPERTY
@given(cases())
def test_outside_since_is_kept_only_for_members_retained_outside_their_band(case: Case) -> None:
    """A node held by the band rule outside its strict band was already a member, and its
    outside_since is set, not in the future and less than ``dwell`` ago (the dwell clock
    keeps running: it is the input's value, or ``now`` if the node just left). Every other
    node's outside_since is NaN."""
    s, configs, now, h = case
    a = assign(s, configs, now, h)
    for ci, c in enumerate(configs):
        held = band_members(a, ci)
        outside = held & ~inside(s.util, c)
        assert (s.owner[outside] == ci).all()
        since = a.outside_since[outside]
        expected = np.where(np.isnan(s.outside_since[outside]), now, s.outside_since[outside])
        assert np.array_equal(since, expected)
        assert (now - since < h.dwell).all()
        assert np.isnan(a.outside_since[held & inside(s.util, c)]).all()
    assert np.isnan(a.outside_since[(a.owner == NO_OWNER) | a.borrowed]).all()


@PROPERTY
@given(cases())
def test_shard_sizes_respect_max_nodes_and_min_nodes(case: Case) -> None:
    """No shard exceeds MAX_NODES. A shard below MIN_NODES only when nothing was left to
    borrow: no unowned node and no other shard above its own MIN_NODES. A shard that
    borrowed holds no more than its MIN_NODES (it borrows only up to it)."""
    s, configs, now, h = case
    a = assign(s, configs, now, h)
    size = counts(a, configs)
    for ci, c in enumerate(configs):
        assert size[ci] <= c.max_nodes
        if size[ci] < c.min_nodes:
            assert not (a.owner == NO_OWNER).any()
            assert all(size[d] <= configs[d].min_nodes for d in range(len(configs)) if d != ci)
        if (a.borrowed & (a.owner == ci)).any():
            assert size[ci] <= c.min_nodes


@PROPERTY
@given(cases())
def test_a_candidate_is_passed_over_only_for_higher_ranked_nodes_of_a_full_shard(case: Case) -> None:
    """If config ``ci`` passed over a candidate (see ``passed_over``), every node ``ci`` holds
    by the band rule ranks at least as high (warmup if PREFER_WARMUP, then current member,
    then utilization); and if any node is unowned in the result (so no shard had to take
    nodes from another), ``ci`` holds exactly MAX_NODES by the band rule."""
    s, configs, now, h = case
    a = assign(s, configs, now, h)
    anything_unowned = bool((a.owner == NO_OWNER).any())
    for ci, c in enumerate(configs):
        skipped = np.flatnonzero(passed_over(s, a, ci, c, now, h))
        if not len(skipped):
            continue
        held = np.flatnonzero(band_members(a, ci))
        best_skipped = max(rank(s, ci, c, i) for i in skipped)
        assert all(rank(s, ci, c, j) >= best_skipped for j in held)
        if anything_unowned:
            assert len(held) == c.max_nodes


@PROPERTY
@given(cases())
def test_prefer_warmup_takes_warmup_nodes_before_any_other(case: Case) -> None:
    """For a PREFER_WARMUP config ``ci``: if a warmup node that was its candidate was left
    (see ``eligible_for``: a member inside the band or retained by hysteresis, or any node
    inside the entry band; and not taken by an earlier config, witnessed by being unowned in
    the result or held by a later config by the band rule), then ``ci`` holds no non-warmup
    node by the band rule at all, not even a retained current member, because the
    docstring puts warmup before current membership."""
    s, configs, now, h = case
    a = assign(s, configs, now, h)
    for ci, c in enumerate(configs):
        if c.prefer_warmup and (passed_over(s, a, ci, c, now, h) & s.warmup).any():
            assert s.warmup[band_members(a, ci)].all()


@PROPERTY
@given(cases())
def test_members_inside_their_band_stay(case: Case) -> None:
    """A current member of ``ci`` strictly inside ``ci``'s band ends up in exactly one of:
    still in ``ci``, not borrowed (stability); held by an earlier config whose entry band
    contains it (earlier wins) — from which ``ci``, if short, may borrow it back; borrowed
    by another shard while ``ci`` keeps at least its MIN_NODES (or an earlier config's
    entry band contains it); or passed over because ``ci`` was full of nodes ranking at
    least as high (capped away)."""
    s, configs, now, h = case
    a = assign(s, configs, now, h)
    size = counts(a, configs)
    for ci, c in enumerate(configs):
        for i in np.flatnonzero((s.owner == ci) & inside(s.util, c)):
            new = int(a.owner[i])
            one = s.util[i : i + 1]
            earlier_wins = any(entering(one, configs[d], h.margin)[0] for d in range(ci))
            if new == ci:  # borrowed back only after an earlier config took it
                assert not a.borrowed[i] or earlier_wins
            elif new != NO_OWNER and not a.borrowed[i] and new < ci:
                assert entering(one, configs[new], h.margin)[0]
            elif new != NO_OWNER and a.borrowed[i]:
                assert size[ci] >= c.min_nodes or earlier_wins
            else:
                held = np.flatnonzero(band_members(a, ci))
                assert all(rank(s, ci, c, j) >= rank(s, ci, c, i) for j in held)
                if new == NO_OWNER:
                    assert len(held) == c.max_nodes


@PROPERTY
@given(cases())
def test_assign_is_deterministic_and_leaves_its_input_alone(case: Case) -> None:
    """Same input, same output (ties included); the input arrays are not modified."""
    s, configs, now, h = case
    before = [x.copy() for x in (s.util, s.warmup, s.owner, s.outside_since)]
    a, b = assign(s, configs, now, h), assign(s, configs, now, h)
    assert np.array_equal(a.owner, b.owner)
    assert np.array_equal(a.borrowed, b.borrowed)
    assert np.array_equal(a.outside_since, b.outside_since, equal_nan=True)
    for old, new in zip(before, (s.util, s.warmup, s.owner, s.outside_since)):
        assert np.array_equal(old, new, equal_nan=True)


# ----------------------------------------------------------------------------- flapping


def owner_changes(hysteresis: Hysteresis, *, seed: int = 20240601, syncs: int = 200) -> np.ndarray:
    """40 nodes under the default configs: 10 volcano members at 0.6 (its top edge) and 10
    agent members at 0.7 (its bottom edge), each wobbling by a fresh uniform [-0.03, +0.03]
    every 60 s sync, plus 10 steady nodes inside each band so neither shard needs to borrow.
    Each sync's input is the previous result. Returns each node's number of owner changes."""
    rng = np.random.default_rng(seed)
    base = np.array([0.6] * 10 + [0.7] * 10 + [0.3] * 10 + [0.9] * 10)
    wobbles = np.arange(40) < 20
    warmup = np.zeros(40, dtype=np.bool_)
    a = Assignment(
        owner=np.array([VOLCANO] * 10 + [AGENT] * 10 + [VOLCANO] * 10 + [AGENT] * 10, dtype=np.int64),
        borrowed=np.zeros(40, dtype=np.bool_),
        outside_since=np.full(40, math.nan),
    )
    changes = np.zeros(40, dtype=np.int64)
    for k in range(1, syncs + 1):
        util = base + np.where(wobbles, rng.uniform(-0.03, 0.03, 40), 0.0)
        b = assign(follow(a, util, warmup), DEFAULTS, 60.0 * k, hysteresis)
        changes += b.owner != a.owner
        a = b
    return changes


def test_default_hysteresis_moves_a_wobbling_edge_node_at_most_once() -> None:
    changes = owner_changes(Hysteresis())
    assert changes.max() <= 1, changes.tolist()


def test_without_hysteresis_the_same_wobble_flaps() -> None:
    """The contrast: the same run moves edge nodes repeatedly when hysteresis is off."""
    changes = owner_changes(Hysteresis(margin=0.0, dwell=0.0))
    assert changes[:20].max() > 1
    assert changes[20:].max() == 0


def test_the_margin_alone_keeps_a_wobbling_edge_node_put() -> None:
    """Without a dwell-based exit, a ±0.03 wobble inside a 0.05 margin moves nothing."""
    assert owner_changes(Hysteresis(margin=0.05, dwell=math.inf)).max() == 0


# ----------------------------------------------------------------------------- dwell

TWO_BANDS = [band("low", 0.0, 0.6), band("high", 0.7, 1.0)]
DWELL = Hysteresis(margin=0.05, dwell=300.0)
STEADY = [0.3, 0.3, 0.9, 0.9]  # keeps each shard populated; irrelevant to the node under test


def run_node(path: list[float], *, owner: int, step: float = 30.0) -> list[int]:
    """Node 0 follows ``path`` one sync per ``step`` seconds starting at t=0; its owner per sync."""
    s = state([path[0], *STEADY], [owner, 0, 0, 1, 1])
    seen = []
    for k, u in enumerate(path):
        s.util = np.array([u, *STEADY])
        a = assign(s, TWO_BANDS, k * step, DWELL)
        seen.append(int(a.owner[0]))
        s = follow(a, s.util, s.warmup)
    return seen


def test_a_node_just_past_the_edge_leaves_after_dwell_not_before() -> None:
    seen = run_node([0.62] * 12, owner=0)  # t = 0, 30, ..., 330; first seen outside at t=0
    assert seen == [0] * 10 + [NO_OWNER] * 2  # still in at t=270, gone at t=300


def test_coming_back_inside_restarts_the_dwell_clock() -> None:
    seen = run_node([0.62] * 8 + [0.58] + [0.62] * 11, owner=0)  # back inside at t=240, out again at t=270
    assert seen == [0] * 19 + [NO_OWNER]  # leaves at t=270+300=570, the 20th sync


@pytest.mark.parametrize(("jump", "then"), [(0.67, NO_OWNER), (0.9, 1), (0.52, 0)])
def test_a_node_jumping_beyond_the_margin_moves_at_the_next_sync(jump: float, then: int) -> None:
    seen = run_node([0.3, jump, jump], owner=0)  # 0.52 is a jump inside the band: no move
    assert seen == [0, then, then]


def test_the_margin_applies_below_a_band_too() -> None:
    seen = run_node([0.75, 0.66, 0.64], owner=1, step=60.0)  # high starts at 0.7: 0.65 is the margin edge
    assert seen == [1, 1, NO_OWNER]


def test_a_node_enters_a_band_only_inside_it_by_the_margin() -> None:
    # high's entry edge is 0.7 + 0.05; low's is 0.6 - 0.05.
    assert run_node([0.68, 0.72, 0.74, 0.76], owner=NO_OWNER) == [NO_OWNER, NO_OWNER, NO_OWNER, 1]
    assert run_node([0.62, 0.58, 0.56, 0.54], owner=NO_OWNER) == [NO_OWNER, NO_OWNER, NO_OWNER, 0]


def test_a_node_that_left_does_not_come_back_at_the_edge() -> None:
    seen = run_node([0.67, 0.59, 0.58, 0.57, 0.5], owner=0)  # left beyond the margin; back in only below 0.55
    assert seen == [NO_OWNER, NO_OWNER, NO_OWNER, NO_OWNER, 0]


@pytest.mark.parametrize(("util", "owner"), [(0.0, 0), (1.0, 1), (1.15, 1)])
def test_the_ends_of_the_scale_need_no_entry_margin(util: float, owner: int) -> None:
    """MIN_UTIL 0 and MAX_UTIL 1 are not inner edges; a band reaching 1.0 is open above."""
    assert run_node([util], owner=NO_OWNER) == [owner]


# ----------------------------------------------------------------------------- MIN_NODES borrowing

NO_HYSTERESIS = Hysteresis(margin=0.0, dwell=0.0)


def owners_and_borrowed(
    configs: list[ShardConfig], util: list[float], *, hysteresis: Hysteresis = NO_HYSTERESIS
) -> tuple[list[int], list[bool]]:
    """One sync from an all-unowned cluster (no previous members to prefer)."""
    a = assign(state(util), configs, 1000.0, hysteresis)
    return a.owner.tolist(), a.borrowed.tolist()


def test_a_short_band_borrows_the_nearest_unowned_nodes() -> None:
    configs = [band("low", 0.0, 0.3, min_nodes=3), band("mid", 0.4, 0.45), band("high", 0.8, 1.0)]
    # low holds 0.1; unowned gap nodes lie 0.2, 0.05, 0.3 and 0.4 from it; 0.45 is mid's.
    owner, borrowed = owners_and_borrowed(configs, [0.1, 0.5, 0.35, 0.6, 0.45, 0.7])
    assert owner == [0, 0, 0, NO_OWNER, 1, NO_OWNER]
    assert borrowed == [False, True, True, False, False, False]


def test_a_short_band_borrows_from_above_and_below_by_distance() -> None:
    configs = [band("mid", 0.4, 0.5, min_nodes=3)]
    owner, borrowed = owners_and_borrowed(configs, [0.45, 0.2, 0.33, 0.58, 0.9, 0.62])
    assert owner == [0, NO_OWNER, 0, 0, NO_OWNER, NO_OWNER]  # 0.33 (0.07 below), 0.58 (0.08 above)
    assert borrowed == [False, False, True, True, False, False]


def test_unowned_nodes_are_borrowed_before_nearer_nodes_of_surplus_shards() -> None:
    configs = [band("low", 0.0, 0.3, min_nodes=3), band("mid", 0.4, 0.6, min_nodes=1)]
    # mid holds three (two surplus, nearer to low); the only unowned node is far away at 0.9.
    owner, borrowed = owners_and_borrowed(configs, [0.1, 0.4, 0.45, 0.5, 0.9])
    assert owner == [0, 0, 1, 1, 0]  # 0.9 first, then mid's nearest surplus node 0.4
    assert borrowed == [False, True, False, False, True]


def test_a_donor_is_never_taken_below_its_min_nodes() -> None:
    configs = [band("low", 0.0, 0.3, min_nodes=4), band("mid", 0.4, 0.6, min_nodes=2)]
    owner, borrowed = owners_and_borrowed(configs, [0.1, 0.4, 0.45, 0.5])
    assert owner == [0, 0, 1, 1]  # low stays short (2 of 4): mid is at its own MIN_NODES
    assert borrowed == [False, True, False, False]


def test_a_donor_at_its_min_nodes_is_skipped_for_a_farther_surplus_one() -> None:
    configs = [
        band("low", 0.0, 0.3, min_nodes=2),
        band("near", 0.35, 0.4, min_nodes=1),
        band("far", 0.8, 1.0, min_nodes=1),
    ]
    owner, borrowed = owners_and_borrowed(configs, [0.1, 0.35, 0.8, 0.9])
    assert owner == [0, 1, 0, 2]  # near's only node is nearer but near is at MIN_NODES; far has one spare
    assert borrowed == [False, False, True, False]


def test_borrowing_is_not_bound_by_the_margin() -> None:
    configs = [band("low", 0.0, 0.3, min_nodes=2), band("high", 0.7, 1.0)]
    # With the default margin nothing enters low (its entry edge is 0.25): it borrows 0.28
    # (inside, distance 0) and 0.32 (in the margin zone), not the farther 0.4.
    owner, borrowed = owners_and_borrowed(configs, [0.4, 0.32, 0.28], hysteresis=Hysteresis())
    assert owner == [NO_OWNER, 0, 0]
    assert borrowed == [False, True, True]


def test_borrowing_stops_at_min_nodes() -> None:
    configs = [band("low", 0.0, 0.3, min_nodes=2)]
    owner, borrowed = owners_and_borrowed(configs, [0.5, 0.6, 0.7, 0.8])
    assert owner == [0, 0, NO_OWNER, NO_OWNER]
    assert borrowed == [True, True, False, False]


# ----------------------------------------------------------------------------- event trigger


@pytest.mark.parametrize(
    ("before", "after", "crossed"),
    [
        (0.3, 0.45, False),  # inside volcano
        (0.0, 0.5, False),  # inside volcano, from the scale's end
        (0.8, 0.95, False),  # inside agent
        (0.95, 1.1, False),  # agent reaches 1.0, so it is open above
        (0.605, 0.615, False),  # inside volcano's margin zone
        (0.63, 0.67, False),  # in the gap, clear of both margins
        (0.58, 0.61, True),  # across volcano's top edge
        (0.61, 0.64, True),  # out of volcano's margin
        (0.66, 0.69, True),  # into agent's margin
        (0.69, 0.71, True),  # across agent's bottom edge
    ],
)
def test_band_signature_changes_exactly_on_band_edge_crossings(before: float, after: float, crossed: bool) -> None:
    """With margin 0.02: volcano's edges are 0.6 and 0.62 (margin); the agent's 0.68 (margin)
    and 0.7. Other nodes' signatures are untouched."""
    still = [0.3, 0.9]
    a = band_signature(np.array([before, *still]), DEFAULTS, 0.02)
    b = band_signature(np.array([after, *still]), DEFAULTS, 0.02)
    assert bool(a[0] != b[0]) is crossed
    assert (a[1:] == b[1:]).all()


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (0.5, 0.7),  # leaves volcano beyond its margin
        (0.3, 0.9),  # jumps from volcano into the agent band
        (0.68, 0.9),  # enters the agent band from its margin zone
        pytest.param(0.72, 0.78, id="across-agent-entry-edge-0.75"),
        pytest.param(0.58, 0.53, id="across-volcano-entry-edge-0.55"),
    ],
)
def test_a_move_that_changes_a_nodes_owner_changes_its_signature(before: float, after: float) -> None:
    """What the event trigger relies on: if a sync at the new utilization would move a node,
    its signature has changed. Default bands with MIN_NODES 0 (so nothing is borrowed),
    default hysteresis, a lone node that starts unowned."""
    configs = [msgspec.structs.replace(c, min_nodes=0) for c in DEFAULTS]
    h = Hysteresis()
    first = assign(state([before]), configs, 0.0, h)
    second = assign(follow(first, np.array([after]), np.zeros(1, dtype=np.bool_)), configs, 60.0, h)
    assert second.owner[0] != first.owner[0]  # the move is real...
    sig = band_signature(np.array([before, after]), configs, h.margin)
    assert sig[0] != sig[1]  # ...so the event trigger must see it


def test_borrowing_takes_the_nearest_node_even_over_a_former_member() -> None:
    """Nearest by utilization wins (DESIGN §5); a former member is preferred only among equally near nodes."""
    configs = [band("low", 0.0, 0.3, min_nodes=2)]
    a = assign(state([0.1, 0.45, 0.32], owner=[0, 0, NO_OWNER]), configs, 1000.0, Hysteresis())
    assert a.owner.tolist() == [0, NO_OWNER, 0]
    tie = assign(state([0.1, 0.4, 0.4], owner=[0, NO_OWNER, 0]), configs, 1000.0, NO_HYSTERESIS)
    assert tie.owner.tolist() == [0, NO_OWNER, 0]
