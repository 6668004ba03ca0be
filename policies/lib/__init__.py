"""What the policies share: resource shapes, pools, the catalog, Helm values, the policy kit."""
