"""Rendered config files: libyaml's text is PyYAML's for what the program renders, and reads back the same."""

from __future__ import annotations

import yaml

from components.config_files import yaml_text
from components.observability.alertmanager import alertmanager_config


def _configs(plan):
    """Every YAML config file the plan renders into a ConfigMap or Secret, parsed."""
    for resource in plan.resources:
        if resource.type in ("kubernetes:core/v1:ConfigMap", "kubernetes:core/v1:Secret"):
            for key, text in {**(resource.inputs.get("data") or {}), **(resource.inputs.get("stringData") or {})}.items():
                if key.endswith(".yaml") and isinstance(text, str):
                    yield f"{resource.name}/{key}", text


def test_rendered_configs_are_pyyamls_text(stack_plan):
    """The gateway's config.yaml (and any other config rendered as YAML) is the text
    ``yaml.safe_dump(..., sort_keys=False)`` writes for the same data."""
    found = 0
    for where, text in _configs(stack_plan):
        data = yaml.safe_load(text)
        assert text == yaml.safe_dump(data, sort_keys=False) == yaml_text(data), where
        found += 1
    assert found >= 1


def test_awkward_values_read_back_the_same():
    """Values a user may put in settings (non-ASCII, quotes, long text, look-alikes of numbers and
    booleans, line breaks) read back as they were written."""
    awkward = ["é model", "it's", 'say "hi"', "x" * 300, "word " * 40, "8000", "yes", "null", "", "a\nb", "\t",
               "https://hooks.example.com/T000/B000?x=1&y=2#frag", "- dash", "key: value"]
    data = {"models": [{"name": value, "params": {"api_base": value, "n": 3, "on": True}} for value in awkward]}
    assert yaml.safe_load(yaml_text(data)) == data
    assert yaml_text(data).index("models") == 0


def test_alertmanager_config_is_pyyamls_text():
    from components.settings.observability import Alerting

    data = alertmanager_config(Alerting())
    assert yaml_text(data) == yaml.safe_dump(data, sort_keys=False)
