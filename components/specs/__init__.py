"""What the program emits, as plain data: typed settings in, the property dicts the engine receives out.

No Pulumi import here: the components wrap these dicts in resources, and the settings' capacity
check (``components.specs.capacity``) reads the very same dicts, so each object is described once.
Settings types are imported for annotations only, so settings may call down into this package.
"""
