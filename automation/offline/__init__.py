"""The offline check: the program recorded under mocks, the policy pack over gRPC, manifests and the report."""
