"""Provisioning: pending pods in, nodes launched and pods bound out (Karpenter 0.5's provisioning).

One module per step: `gather` (what a batch plans against, parsed once) -> `plan` (the pure solver)
-> `launch` (CreateFleet per group, grouped by `launcher`) -> `register` (Node objects) -> `bind`
(re-check, bind) -> `report` (Events, status, BatchReport). `pipeline` runs one batch through them;
`controller` keeps the loop, leadership and the entry points; `batcher`, `parking`, `offerings`
and `pools` hold the state they share, each with its own lock.
"""
