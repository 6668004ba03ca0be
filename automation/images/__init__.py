"""Image digests: read the ``Image(...)`` pins of ``components/versions.py``, resolve each tag to its
digest through the OCI distribution API, and write the digests back (``python -m automation images``).

``reference`` names a registry and repository as the container runtime does; ``registry`` is the
HTTP client (anonymous bearer tokens, redirects, timeouts); ``pins`` reads and rewrites the versions
file; ``resolve`` ties them together and says what to run where a registry was out of reach.
"""
