"""EKS managed node groups (the system pool and GPU pools) and the Cluster Autoscaler that sizes them."""
