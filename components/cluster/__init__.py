"""Network, EKS control plane, worker node IAM and node types outside AWS."""
