"""Plain data types shared by every karpy process: Provisioner, labels, quantities, resources.

This layer imports nothing from kubernetes, boto3 or flask.
"""
