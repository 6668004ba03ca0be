"""Karpenter: its controller (IAM, interruption queue, charts) and the EC2NodeClasses and NodePools it provisions from."""
