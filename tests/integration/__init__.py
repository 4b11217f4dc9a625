"""Integration tests against the local proving ground (hack/localcluster): real control plane, moto."""
