"""Tests of the policy pack, driven only through its gRPC Analyzer protocol."""
