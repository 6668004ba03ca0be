"""YAML text of the configuration files the program renders into ConfigMaps and Secrets.

One function, so every rendered config is written the same way: the gateway's ``config.yaml`` (one
entry per served model: 190 KB at 500 models) and Alertmanager's ``alertmanager.yaml``.
"""

from __future__ import annotations

from typing import Any

import yaml

#: libyaml's emitter where PyYAML was built with it (the pinned wheels are), PyYAML's own otherwise.
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def yaml_text(data: Any) -> str:
    """``data`` as YAML, keys in their order: the text of ``yaml.safe_dump(data, sort_keys=False)``.

    Written by libyaml, four times faster on a 500-model gateway config. The two emitters write
    the same text for the values these configs hold (names, URLs, numbers, flags); they differ only
    where libyaml folds a long double-quoted string (one with escapes) at another point, which
    reads back as the same value. ``tests/components/test_config_files.py`` compares them.
    """
    return yaml.dump(data, Dumper=_DUMPER, sort_keys=False)
