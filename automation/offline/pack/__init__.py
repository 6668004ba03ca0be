"""The policy pack driven over its gRPC protocol as the Pulumi CLI drives it: the client (runner),
a plan analyzed as the program records it (analysis) and what a run finds (findings)."""
