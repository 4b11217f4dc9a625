"""karpy's controller side: scheduler extender, provisioning and node lifecycle workers."""
