"""Prometheus, alert rules and routes, Alertmanager receivers and Grafana dashboards."""
