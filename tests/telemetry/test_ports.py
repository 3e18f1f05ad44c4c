"""InfiniBand/RoCE ports through the instruments: samples → points → a frame, the same on every path."""

from __future__ import annotations

from trainpulse_otel.samples import PORT_COUNTERS, Collected, PortSample
from trainpulse_otel.telemetry.assembly import FrameAssembler
from trainpulse_otel.telemetry.conversion import observe
from trainpulse_otel.telemetry.latest import LatestSamples

HDR = PortSample("mlx5_0", 1, "ACTIVE", "LinkUp", 200.0, "InfiniBand",
                 tuple((name, 3 * i) for i, name in enumerate(PORT_COUNTERS)))  # fmt: skip
ROCE_DOWN = PortSample("mlx5_1", 1, "DOWN", "Disabled", 100.0, "Ethernet", (("symbol_error", 65535),))
OTHER_NODE = PortSample("mlx5_0", 1, "ACTIVE", "LinkUp", 400.0, "InfiniBand", (("link_downed", 2),), "node-7")


def assembled(points, per_point: bool = False):
    assembler = FrameAssembler()
    if per_point:
        for suffix, listed in points.items():
            for value, attrs in listed:
                assembler.add(suffix, attrs, value)
    else:
        assembler.add_observations(points)
    return assembler.frame(1.0)


def test_ports_come_back_from_their_points_as_they_went_in_sorted_by_node_device_and_port():
    points = observe(ports=(OTHER_NODE, ROCE_DOWN, HDR))
    assert points["ib.port.symbol_error"] == [(65535, {"ib.device": "mlx5_1", "ib.port": 1}), (0, HDR_ATTRS)]
    assert points["ib.port.rate"][0][0] == 4e11  # Gb/s out as bit/s
    for per_point in (False, True):
        assert assembled(points, per_point).ports == (HDR, ROCE_DOWN, OTHER_NODE)


HDR_ATTRS = {"ib.device": "mlx5_0", "ib.port": 1}


def test_a_planned_layout_assembles_the_same_ports_from_values_alone():
    points = observe(ports=(HDR, ROCE_DOWN))
    metrics = [(suffix, [attrs for _, attrs in listed], None) for suffix, listed in points.items()]
    plan = FrameAssembler.plan(None, metrics)
    values = [value for listed in points.values() for value, _ in listed]
    assert plan.frame(values, 1.0).ports == (HDR, ROCE_DOWN)


def test_the_latest_ports_stay_until_a_collection_sees_them_again():
    latest = LatestSamples()
    latest.put(Collected(ports=(HDR,)), 1.0)
    latest.put(Collected(gpus=()), 2.0)  # a collector that does not see ports leaves them as they are
    assert latest.current().ports == (HDR,)
    assert assembled(latest.observations()).ports == (HDR,)
    latest.put(Collected(ports=()), 3.0)  # a host whose HCAs are gone
    assert assembled(latest.observations()).ports == ()
