"""A batch on its way to a worker's actor (``agent_scheduler.actors.Call``): what arrives is what was sent."""

from __future__ import annotations

import msgspec
import pytest

from agent_scheduler.actors import CALLS, Call, _decode_resources
from cluster.model.resources import Resources
from cluster.sim.pods import make_pod
from cluster.store.records import NO_CARDS, PodRecord


def _record(i: int, request: Resources, cards: Resources = NO_CARDS) -> PodRecord:
    pod = make_pod(f"p{i}", requests={"cpu": "1"}, scheduler="agent-scheduler")
    return PodRecord(
        uid=pod.uid,
        pod=pod,
        request=request,
        scheduler="agent-scheduler",
        group="",
        priority=0,
        node="",
        accounted="",
        phase="Pending",
        version=i,
        cards=cards,
    )


def test_a_batchs_records_arrive_as_sent_each_with_its_own_request_and_cards() -> None:
    # two alike but for an amount: each pod keeps its own
    small, large = Resources({"cpu": 500, "memory": 2**29}), Resources({"cpu": 500, "memory": 2**30})
    cards = Resources({"gpu.caldera.io/0": 50})
    sent = Call(7, [_record(i, small if i % 2 else large, cards if i % 3 == 0 else Resources()) for i in range(12)])
    decoder = msgspec.msgpack.Decoder(Call, dec_hook=_decode_resources)
    for _ in range(2):  # the second time, the requests are ones seen before
        got = decoder.decode(CALLS.encode(sent))
        assert got == sent
        assert [r.request for r in got.pods] == [small if i % 2 else large for i in range(12)]
        assert [r.cards for r in got.pods] == [cards if i % 3 == 0 else Resources() for i in range(12)]
        assert all(isinstance(r.request, Resources) and isinstance(r.cards, Resources) for r in got.pods)


def test_a_resources_value_that_is_not_a_map_of_amounts_is_refused() -> None:
    sent = msgspec.to_builtins(Call(1, [_record(0, Resources({"cpu": 1}))]), enc_hook=dict)
    sent[1][0]["request"] = {"cpu": [1]}
    decoder = msgspec.msgpack.Decoder(Call, dec_hook=_decode_resources)
    with pytest.raises(msgspec.ValidationError, match="cpu"):
        decoder.decode(msgspec.msgpack.encode(sent))
