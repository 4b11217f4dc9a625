"""karpy's admission webhook: Provisioner defaulting and validation, pod defaulting (`app.create_app`)."""
