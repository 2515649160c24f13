"""What makes one NCA graph better than another (thesis §3.3.5: "Jumpgate greedily picks the
smallest graph so that operations are fused together as much as possible").

The mapper adds up the cost of every placement and keeps the graph with the smallest total; among
equal totals the first one found wins, and the search explores implementations in name order,
so ties fall to implementation names. Costs are tuples compared lexicographically and added
element-wise, which keeps them additive so partial searches can be memoised.

Default: (NCA instances including converters, converters, sum of plugin preferences). The cost
hooks are declared on `NcaImplementation` and checked when a plugin class is defined: `preference`
(an int, default 0; lower is preferred) wins ties against implementations of equal size, e.g. a
switch over a software NCA. A plugin that runs in the network path (a switch) declares
`in_network = True`: its instances do not count as instances, because they cost no host process and no extra hop (the packets cross the switch
anyway); so a scan feeding a switch that aggregates costs what a scan with a fused aggregation
costs, and the switch's preference decides. Pass another `PlacementCost` to `map_plan` to change
the policy (e.g. predicted throughput).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from ..nca.interface import NcaImplementation

Cost = tuple[int, ...]
PlacementCost = Callable[[NcaImplementation, tuple[str, ...], Sequence[NcaImplementation]], Cost]

ZERO: Cost = ()  # the cost of nothing; adds to a cost of any shape


def default_cost(impl: NcaImplementation, ops: tuple[str, ...],
                 converters: Sequence[NcaImplementation]) -> Cost:
    """Cost of one NCA taking `ops`, plus the converters inserted on its edges."""
    n = len(converters)
    return ((0 if impl.in_network else 1) + n, n, impl.preference + sum(c.preference for c in converters))


def add(a: Cost, b: Cost) -> Cost:
    if not a or not b:
        return a or b
    if len(a) != len(b):
        raise ValueError(f"costs of different shapes: {a} and {b}")
    return tuple(x + y for x, y in zip(a, b, strict=True))


def describe(cost: Cost) -> str:
    if len(cost) == 3:
        text = f"{cost[0]} NCA instance{'s' if cost[0] != 1 else ''}"
        if cost[1]:
            text += f" ({cost[1]} converter{'s' if cost[1] != 1 else ''})"
        if cost[2]:
            text += f", preference {cost[2]}"
        return text
    return f"cost {cost}"
