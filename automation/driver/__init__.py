"""The stack driver: workspaces, locks, signals, self-service environments, teardown and post-deploy checks."""
