"""The llm-platform program's components: one ComponentResource per concept, plus the settings,
scheduling contract, versions and instance catalog they are built from."""
