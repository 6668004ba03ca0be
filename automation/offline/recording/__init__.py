"""How the offline check records a program quickly: an eager event loop and stand-ins for SDK
functions, each giving what the function it replaces gives (``automation/offline/plan.py`` runs them)."""
