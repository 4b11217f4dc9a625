"""karpy's controller package, what `pkg/` is to Karpenter.

Layers, top to bottom (docs/contracts.md; `lint-imports` checks them): `http` (the scheduler
extender proper: the endpoints kube-scheduler calls) > `provisioning` | `lifecycle` (the workers)
> `cloud` | `cluster` (the AWS and Kubernetes adapters) > `scheduling` (the pure solver) > `api`
(the models Kubernetes JSON is parsed into). `cli` and `main` wire them into processes; `state`,
`settings` and `retry` are shared by all. The admission webhook lives beside it in `webhook/`.
"""
