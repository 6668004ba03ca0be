"""Verbs of ``python -m automation`` that drive the Pulumi CLI: one module per verb group.

Each verb is a pair of small functions, ``_declare_<verb>`` (arguments) and ``_run_<verb>``
(returns an exit code); each module's ``declare(verbs)`` registers its verbs with the parser.
"""
