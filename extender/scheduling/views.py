"""Provisioner views kept across solves: a batch of a few pods need not re-derive the whole catalog.

A `ProvisionerView` (candidates.py) is a function of its Provisioner, the catalog, the DaemonSet
pods and the batch's resource dimensions; the catalog is the same list between refreshes (the
cloud provider's instance-type cache hands out one list per TTL). `view_of` returns the view built
for equal inputs earlier (the catalog compared element by element, by identity first: InstanceType
is frozen), so its memos (which types meet a requirement set, candidates.CandidateSet) carry over
too. A bounded memo, not state: what it returns is what `ProvisionerView.build` would return.
Karpenter caches the same way: each InstanceType computes its allocatable and requirements once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from extender.api.pod import Pod
from extender.api.provisioner import Provisioner
from extender.scheduling.candidates import ProvisionerView
from extender.scheduling.instancetypes import InstanceType

#: Views kept: Provisioners x catalogs (one per zone set) x resource dimension sets seen lately.
MAX_VIEWS = 32


@dataclass(frozen=True, eq=False)
class _Kept:
    provisioner: Provisioner
    catalog: tuple[InstanceType, ...]
    daemonsets: tuple[Pod, ...]
    dims: tuple[str, ...]
    view: ProvisionerView

    def serves(
        self,
        provisioner: Provisioner,
        catalog: tuple[InstanceType, ...],
        daemonsets: tuple[Pod, ...],
        dims: tuple[str, ...],
    ) -> bool:
        return (
            self.dims == dims
            and (self.provisioner is provisioner or self.provisioner == provisioner)
            and self.daemonsets == daemonsets
            and self.catalog == catalog
        )


class ViewCache:
    """The last `size` views, most recently used last. Shared by threads without a lock (the pure
    core takes none): the kept views are an immutable tuple swapped whole, so a reader always sees
    a consistent one, and a swap lost to a concurrent one only costs a later rebuild."""

    def __init__(self, size: int = MAX_VIEWS) -> None:
        self.size = size
        self._kept: tuple[_Kept, ...] = ()

    def view_of(
        self,
        provisioner: Provisioner,
        instance_types: Sequence[InstanceType],
        daemonsets: Sequence[Pod],
        dims: Sequence[str],
    ) -> ProvisionerView:
        catalog, pods, dimensions = tuple(instance_types), tuple(daemonsets), tuple(dims)
        kept = self._kept
        for found in reversed(kept):
            if found.serves(provisioner, catalog, pods, dimensions):
                if found is not kept[-1]:
                    self._kept = (*(k for k in kept if k is not found), found)
                return found.view
        view = ProvisionerView.build(provisioner, catalog, pods, dimensions)
        self._kept = (*self._kept, _Kept(provisioner, catalog, pods, dimensions, view))[-self.size :]
        return view

    def clear(self) -> None:
        self._kept = ()


#: The process's views: every solve reads the same catalog until the next refresh.
VIEWS = ViewCache()
