"""What the check holds on to while the pack answers (500 models under 400 MB): the
AnalyzeStack request is the only copy of the marshalled inputs, and nothing of the run is kept once
its answers are read."""

from __future__ import annotations

from automation.offline.pack.analysis import PlanAnalysis
from automation.offline.pack.runner import PolicyPackRunner, Structs, provider_urn, to_struct


class _Answer:
    def __init__(self, request):
        self.request = request

    def result(self):
        return type("Reply", (), {"diagnostics": []})()


class _Stub:
    """Takes the requests a started pack would get and answers each with no findings."""

    def __init__(self):
        self.stack_requests = []
        self.AnalyzeStack = type("Call", (), {"future": self._stack})()
        self.Analyze = type("Call", (), {"future": lambda _, request, timeout: _Answer(request)})()

    def _stack(self, request, timeout):
        self.stack_requests.append(request)
        return _Answer(request)


class _Runner(PolicyPackRunner):
    def __init__(self):
        super().__init__()
        self.fake = _Stub()

    @property
    def stub(self):
        return self.fake

    def connect(self):
        pass

    def configure(self, config=None):
        return {}

    def info(self):
        return type("Info", (), {"name": "pack", "version": "1"})()


def test_requests_hold_the_only_copy_of_the_inputs_but_providers(prod_plan):
    """Each resource's inputs are marshalled straight into its Analyze request and its AnalyzeStack entry;
    only the two providers' (sent with every resource they provide) are kept between requests."""
    resources = [r.__dict__ for r in prod_plan.resources]
    by_urn = {r["urn"]: r for r in resources}
    providers = {provider_urn(r) for r in resources} & set(by_urn)
    structs = Structs()
    runner = _Runner()
    analyzed = [runner.analyze_async(r, by_urn.get(provider_urn(r)), structs=structs).request for r in resources]
    runner.analyze_stack_async(resources, by_urn, structs=structs)
    (request,) = runner.fake.stack_requests
    assert len(request.resources) == len(resources) == 237
    assert request.resources[7].properties == analyzed[7].properties == to_struct(resources[7]["inputs"])
    assert len(providers) == 2 and {urn for urn in by_urn if urn in structs} == providers


def test_analysis_releases_what_it_sent(dev_plan):
    analysis = PlanAnalysis(_Runner(), None)
    for r in dev_plan.resources:
        analysis.submit(r)
    report = analysis.finish(dev_plan.resources)
    assert report.violations == []
    assert len(analysis._structs) == 0 and analysis._calls == {} and analysis._by_urn == {}


def test_young_cycles_die_while_the_collector_is_off():
    """Within ``fewer_collections`` young passes are rare, yet a cycle the program drops is freed (by a
    young-generation pass, once the program has allocated ``YOUNG_OBJECTS`` more)."""
    import gc
    import threading
    import weakref

    from automation.offline.check import YOUNG_OBJECTS, fewer_collections

    class Node:
        pass

    with fewer_collections():
        assert gc.get_threshold() == (100_000, 8, 1_000)
        node = Node()
        node.self = node
        gone = threading.Event()
        weakref.finalize(node, gone.set)
        del node
        assert not gone.wait(timeout=0.5), "collected before the young generation filled"
        young = [[] for _ in range(YOUNG_OBJECTS + 1000)]  # the program goes on allocating
        assert gone.wait(timeout=60), "the dropped cycle was never collected"
        del young
