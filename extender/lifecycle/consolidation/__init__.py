"""Consolidation: keep a Provisioner's nodes near the cheapest shape that holds their pods.

`view` (plain data: the cluster as the decision sees it), `eligibility` (which nodes may be
disrupted at all), `decide` (pure: which nodes to delete or replace, simulated with the solver),
`snapshot` (API JSON -> view), `worker` (the adapter that validates, launches, drains).
"""
