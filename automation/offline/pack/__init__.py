"""The policy pack driven over its gRPC protocol as the Pulumi CLI drives it: the client (runner),
the process that feeds it during a check (feeder, streaming) and what a run finds (findings)."""
