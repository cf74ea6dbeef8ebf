"""The docker backend: the engine, the images (built from a local base, no registry), the
containers of a cluster, their partitions, and the removal of what dead runs left."""
