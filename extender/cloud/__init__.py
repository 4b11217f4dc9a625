"""The cloud-provider seam: one interface (types.CloudProvider), AWS as its first implementation."""
