"""AWS implementation of the CloudProvider interface (`provider.AWSCloudProvider`), one concern per module."""
