"""Capacity and cost: one pure-Python model of scheduling and autoscaling, shared by the pack and the program.

A library, not a policy module: it imports nothing from Pulumi and only relative modules, so the
pack imports it as ``capacity`` (the pack directory is on ``sys.path``) and the program as
``policies.capacity``. Modules:

- :mod:`.instances`  instance facts, EKS reserved CPU/memory and max pods -> allocatable;
- :mod:`.charts`     DaemonSets that pinned Helm charts and EKS add-ons put on nodes;
- :mod:`.llm`        model catalog and the weights + KV cache memory fit;
- :mod:`.model`      the neutral input (pools, DaemonSets, workloads, quotas);
- :mod:`.simulate`   the simulation and its findings;
- :mod:`.cost`       worst-case GPU count and cost of a pool;
- :mod:`.engine`     adapter from a stack's resources (engine form) to the neutral input;
- :mod:`.bounded_json` JSON from outside read with a nesting bound (no parser recursion on hostile input).
"""

from .simulate import CHECKS, Finding, Simulation, simulate

__all__ = ["CHECKS", "Finding", "Simulation", "simulate"]
