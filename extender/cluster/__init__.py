"""The Kubernetes adapters: one verb per module, API JSON in (or the api's models where they enter),
typed `errors.ClusterError`s out instead of the client's ApiException."""
