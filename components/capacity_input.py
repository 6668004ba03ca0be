"""Old home of the settings -> capacity adapter, now ``components.specs.capacity``: kept for the
importers outside ``components/`` (the pack's capacity tests, the capacity benchmark)."""

from components.specs.capacity import emitted, problem_key, settings_cluster, settings_simulation

__all__ = ["emitted", "problem_key", "settings_cluster", "settings_simulation"]
