"""What the program emits, as plain data: typed settings in, the property dicts the engine receives out.

No Pulumi import here: the components wrap these dicts in resources, and the stack's blueprint
(``blueprint``: which objects a stack has, in engine form) is made of the very same dicts, which the
capacity verdict (``components.capacity_check``) reads.
Settings types are imported for annotations only, so settings may call down into this package.
"""
