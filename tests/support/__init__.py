"""Test helpers: local Prometheus/LiteLLM/Helm runners, evaluators and stand-ins."""
