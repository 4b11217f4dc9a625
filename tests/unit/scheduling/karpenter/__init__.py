"""Karpenter's own scheduling suite (kubernetes-sigs/karpenter pkg/controllers/provisioning/scheduling)
ported to karpy's pure solve(): each test names the Karpenter test it ports."""
