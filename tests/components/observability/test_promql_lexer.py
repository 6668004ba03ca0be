"""The PromQL reader the metric-contract tests use (tests/support/promql.py), on the cases where a
naive scan goes wrong: colon names, functions and aggregators, label names in matchers and grouping
clauses, strings that look like metrics, durations, subqueries, offsets, keywords in any case."""

from __future__ import annotations

import pytest

from tests.support.promql import Selector, reads, tokens


def test_vllm_colon_names_are_one_metric():
    got = reads('histogram_quantile(0.95, sum by (le, model_name) (rate(vllm:time_to_first_token_seconds_bucket{tier="a"}[5m]))) > 0.5')
    assert got.selectors == [Selector("vllm:time_to_first_token_seconds_bucket", ("tier",))]
    assert got.grouping_labels == {"le", "model_name"}
    assert got.functions == {"histogram_quantile", "sum", "rate"}


def test_recording_rule_names_and_subqueries():
    got = reads("sum_over_time(llm_platform:gpus_allocatable:sum[30d:5m]) / 12")
    assert got.metrics == {"llm_platform:gpus_allocatable:sum"}
    assert got.functions == {"sum_over_time"}


def test_strings_are_not_metrics_and_label_replace_makes_its_destination():
    got = reads(
        'avg by (label_llm_platform_io_pool) (DCGM_FI_DEV_GPU_UTIL * on (Hostname) group_left(label_llm_platform_io_pool) '
        'label_replace(kube_node_labels{label_llm_platform_io_pool!=""}, "Hostname", "$1", "node", "(.*)"))'
    )
    assert got.selectors == [
        Selector("DCGM_FI_DEV_GPU_UTIL", ()),
        Selector("kube_node_labels", ("label_llm_platform_io_pool",)),
    ]
    assert got.grouping_labels == {"label_llm_platform_io_pool", "Hostname"}
    assert got.made_labels == {"Hostname"}
    assert "node" not in got.metrics and "Hostname" not in got.metrics


def test_set_operators_bool_offset_and_keywords_in_upper_case():
    got = reads("SUM BY (x) (foo offset 5m) and bool bar or on() (0 * count(up == 1)) unless baz atan2 qux")
    assert got.metrics == {"foo", "bar", "up", "baz", "qux"}
    assert got.grouping_labels == {"x"}
    assert got.functions == {"sum", "count"}


def test_name_matcher_inf_and_nan():
    got = reads('{__name__="x:y", job="j"} / Inf + NaN')
    assert got.selectors == [Selector("x:y", ("job",))]


def test_absent_of_a_comparison_and_aggregation_clause_after_the_body():
    assert reads('absent(up{namespace="llm-gateway",service="llm-gateway"} == 1)').selectors == [
        Selector("up", ("namespace", "service"))
    ]
    got = reads("sum(rate(litellm_proxy_total_requests_metric_total[2m])) by (requested_model)")
    assert got.metrics == {"litellm_proxy_total_requests_metric_total"}
    assert got.grouping_labels == {"requested_model"}


def test_escaped_quotes_and_regex_matchers():
    got = reads(r'max by (xid) (DCGM_EXP_XID_ERRORS_COUNT{xid=~"48|63", note!~"a\"b"}) > 0')
    assert got.selectors == [Selector("DCGM_EXP_XID_ERRORS_COUNT", ("xid", "note"))]


def test_durations_and_numbers_lex_as_such():
    kinds = [(t.kind, t.text) for t in tokens("rate(x[1h30m]) > 1e-9 + 0x1f + .5")]
    assert ("duration", "1h30m") in kinds and ("number", "1e-9") in kinds and ("number", "0x1f") in kinds
    assert ("number", ".5") in kinds


def test_an_unknown_character_is_an_error():
    with pytest.raises(ValueError, match="unexpected character '\\$'"):
        tokens("foo $ bar")
