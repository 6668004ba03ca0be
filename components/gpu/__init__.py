"""GPU node software: which agent runs on which node type, the device plugin, GPU Operator, DCGM exporter and DRA driver."""
