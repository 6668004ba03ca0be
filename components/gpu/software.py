"""Moved to ``components.specs.gpu_software``; this name stays only while README's map points here."""

from components.specs.gpu_software import NodeType, Provider, operator_node_labels

__all__ = ["NodeType", "Provider", "operator_node_labels"]
