"""Pure decisions over a snapshot of the cluster; handlers gather the snapshot and carry the plan out."""
