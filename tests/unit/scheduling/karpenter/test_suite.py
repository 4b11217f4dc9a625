"""Karpenter suite_test.go (pkg/controllers/provisioning/scheduling) on karpy's solve().

Every test names the Karpenter test it ports (Describe/Context: "It"). The suite's NodePool allows
spot, on-demand and reserved: a Provisioner without requirements. Karpenter's fake instance types
(default-instance-type 4 vCPU/4Gi/5 pods, small-instance-type 2/2Gi, arm-instance-type 16/128Gi arm64,
...) are replaced by types of the fixture catalog of the same role, named where it matters.

suite_test.go holds the "Well Known Labels", "Constraints Validation" and "Scheduling Logic" contexts
twice (a copy of the first block follows it, minus the Gte/Lte and not-ready-NodePool tests); each
test is ported once.
"""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from extender.api import labels as wk
from extender.api.node import Node, format_taints
from extender.api.pod import Pod
from extender.api.provisioner import Taint
from extender.cluster import inventory
from extender.scheduling.instancetypes import Offering
from extender.scheduling.solver import ExistingNode, solve
from tests.builders import ZONE, pod, pod_manifest, pods, provisioner, req, spread, term
from tests.unit.scheduling.builders import catalog
from tests.unit.scheduling.karpenter.builders import (
    ARCH,
    CAPACITY_TYPE,
    HOSTNAME,
    INSTANCE_TYPE,
    ON_DEMAND,
    OS,
    SPOT,
    Z1,
    Z2,
    Z3,
    Cluster,
    not_ported,
    zones_requirement,
)

KEY, VALUE = "test-key", "test-value"
#: Karpenter's fake types -> fixture types of the same role.
DEFAULT_TYPE = "m5.large"  # "default-instance-type"
SMALL_TYPE = "c5.large"  # "small-instance-type"
ARM_TYPE = "m6g.xlarge"  # "arm-instance-type"


def cluster(**spec) -> Cluster:
    return Cluster(provisioner(**spec))


def labelled(*values: str) -> Cluster:
    """The NodePool requiring test-key In [values]: one v1alpha5 Provisioner per value (spec.labels)."""
    return Cluster(*(provisioner(f"pool-{v}", labels={KEY: v}) for v in values))


def _types(*, gpu: bool = False):
    return [t for t in catalog() if not t.burstable and t.has_gpu == gpu]


def _cheapest_holding(**requests: float):
    """The cheapest non-burstable, accelerator-free type whose allocatable holds `requests`."""
    fitting = [t for t in _types() if all(t.allocatable.get(k) >= v for k, v in requests.items())]
    return min(fitting, key=lambda t: min(o.price for o in t.offerings))


# --- Custom Constraints: NodePool with Labels -----------------------------------------------------


def test_labels_schedule_unconstrained_pods():
    """Karpenter suite_test.go: NodePool with Labels "should schedule unconstrained pods that don't have
    matching node selectors"."""
    c = cluster(labels={KEY: VALUE})
    p = pod()
    c.provision([p])
    assert c.expect_scheduled(p).labels[KEY] == VALUE


def test_labels_do_not_schedule_conflicting_node_selectors():
    """Karpenter suite_test.go: NodePool with Labels "should not schedule pods that have conflicting node
    selectors"."""
    c = cluster(labels={KEY: VALUE})
    p = pod(node_selector={KEY: "different-value"})
    c.provision([p])
    c.expect_not_scheduled(p)


def test_labels_do_not_schedule_node_selectors_with_undefined_key():
    """Karpenter suite_test.go: NodePool with Labels "should not schedule pods that have node selectors with
    undefined key"."""
    c = cluster()
    p = pod(node_selector={KEY: VALUE})
    c.provision([p])
    c.expect_not_scheduled(p)


def test_labels_schedule_matching_requirements():
    """Karpenter suite_test.go: NodePool with Labels "should schedule pods that have matching
    requirements"."""
    c = cluster(labels={KEY: VALUE})
    p = pod(node_requirements=[req(KEY, "In", VALUE, "another-value")])
    c.provision([p])
    assert c.expect_scheduled(p).labels[KEY] == VALUE


def test_labels_do_not_schedule_conflicting_requirements():
    """Karpenter suite_test.go: NodePool with Labels "should not schedule pods that have conflicting
    requirements"."""
    c = cluster(labels={KEY: VALUE})
    p = pod(node_requirements=[req(KEY, "In", "another-value")])
    c.provision([p])
    c.expect_not_scheduled(p)


# --- Custom Constraints: Well Known Labels --------------------------------------------------------


def test_well_known_uses_provisioner_constraints():
    """Karpenter suite_test.go: Well Known Labels "should use NodePool constraints"."""
    c = cluster(requirements=[zones_requirement(Z2)])
    p = pod()
    c.provision([p])
    assert c.expect_scheduled(p).labels[ZONE] == Z2


def test_well_known_uses_node_selectors():
    """Karpenter suite_test.go: Well Known Labels "should use node selectors"."""
    c = cluster(requirements=[zones_requirement(Z1, Z2)])
    p = pod(node_selector={ZONE: Z2})
    c.provision([p])
    assert c.expect_scheduled(p).labels[ZONE] == Z2


def test_well_known_does_not_schedule_a_hostname_selector():
    """Karpenter suite_test.go: Well Known Labels "should not schedule nodes with a hostname selector"."""
    c = cluster()
    p = pod(node_selector={HOSTNAME: "red-node"})
    c.provision([p])
    c.expect_not_scheduled(p)


def test_well_known_does_not_schedule_an_unknown_node_selector_value():
    """Karpenter suite_test.go: Well Known Labels "should not schedule the pod if nodeselector unknown"."""
    c = cluster(requirements=[zones_requirement(Z1)])
    p = pod(node_selector={ZONE: "unknown"})
    c.provision([p])
    c.expect_not_scheduled(p)


def test_well_known_does_not_schedule_outside_provisioner_constraints():
    """Karpenter suite_test.go: Well Known Labels "should not schedule if node selector outside of NodePool
    constraints"."""
    c = cluster(requirements=[zones_requirement(Z1)])
    p = pod(node_selector={ZONE: Z2})
    c.provision([p])
    c.expect_not_scheduled(p)


def test_well_known_schedules_compatible_requirements_in():
    """Karpenter suite_test.go: Well Known Labels "should schedule compatible requirements with
    Operator=In"."""
    c = cluster()
    p = pod(node_requirements=[req(ZONE, "In", Z3)])
    c.provision([p])
    assert c.expect_scheduled(p).labels[ZONE] == Z3


_NO_NUMERIC_LABEL = (
    "karpy's instance types carry no numeric label (Karpenter's fake `integer` label), and a v1alpha5 "
    "requirement on a custom key takes its one value from spec.labels"
)


@pytest.mark.skip(reason=_NO_NUMERIC_LABEL)
@pytest.mark.parametrize("operator", ["Gt", "Lt"])
def test_well_known_schedules_compatible_numeric_requirements(operator):
    """Karpenter suite_test.go: Well Known Labels "should schedule compatible requirements with Operator=Gt"
    and "... Operator=Lt"."""


@pytest.mark.skip(
    reason="Gte/Lte are Karpenter NodePool operators with no v1alpha5/Kubernetes counterpart; "
    + _NO_NUMERIC_LABEL
)
@pytest.mark.parametrize("operator", ["Gte", "Lte"])
def test_well_known_schedules_compatible_gte_lte_requirements(operator):
    """Karpenter suite_test.go: Well Known Labels "should schedule compatible requirements with Operator=Gte"
    and "... Operator=Lte"."""


def test_well_known_does_not_schedule_incompatible_requirements_in():
    """Karpenter suite_test.go: Well Known Labels "should not schedule incompatible preferences and
    requirements with Operator=In"."""
    c = cluster()
    p = pod(node_requirements=[req(ZONE, "In", "unknown")])
    c.provision([p])
    c.expect_not_scheduled(p)


def test_well_known_schedules_compatible_requirements_not_in():
    """Karpenter suite_test.go: Well Known Labels "should schedule compatible requirements with
    Operator=NotIn"."""
    c = cluster()
    p = pod(node_requirements=[req(ZONE, "NotIn", Z1, Z2, "unknown")])
    c.provision([p])
    assert c.expect_scheduled(p).labels[ZONE] == Z3


def test_well_known_does_not_schedule_incompatible_requirements_not_in():
    """Karpenter suite_test.go: Well Known Labels "should not schedule incompatible preferences and
    requirements with Operator=NotIn"."""
    c = cluster()
    p = pod(node_requirements=[req(ZONE, "NotIn", Z1, Z2, Z3, "unknown")])
    c.provision([p])
    c.expect_not_scheduled(p)


@pytest.mark.parametrize(
    ("preference", "zone"),
    [
        pytest.param(req(ZONE, "In", Z2, "unknown"), Z2, id="compatible-in"),
        pytest.param(req(ZONE, "In", "unknown"), None, id="incompatible-in"),
        pytest.param(req(ZONE, "NotIn", Z1, Z3), Z2, id="compatible-not-in"),
        pytest.param(req(ZONE, "NotIn", Z1, Z2, Z3), None, id="incompatible-not-in"),
    ],
)
def test_well_known_schedules_preferences_and_requirements(preference, zone):
    """Karpenter suite_test.go: Well Known Labels "should schedule compatible preferences and requirements
    with Operator=In" (compatible-in), "should schedule incompatible preferences and requirements with
    Operator=In" (incompatible-in), "should schedule compatible preferences and requirements with
    Operator=NotIn" (compatible-not-in) and "should schedule incompatible preferences and requirements with
    Operator=NotIn" (incompatible-not-in). A compatible preference picks the zone; an incompatible one is
    relaxed and the pod scheduled anyway."""
    c = cluster()
    p = pod(node_requirements=[req(ZONE, "In", Z1, Z2, Z3, "unknown")], node_preferences=[preference])
    c.provision([p])
    node = c.expect_scheduled(p)
    if zone is not None:
        assert node.labels[ZONE] == zone


def test_well_known_schedules_compatible_node_selectors_preferences_and_requirements():
    """Karpenter suite_test.go: Well Known Labels "should schedule compatible node selectors, preferences and
    requirements"."""
    c = cluster()
    p = pod(
        node_selector={ZONE: Z3},
        node_requirements=[req(ZONE, "In", Z1, Z2, Z3)],
        node_preferences=[req(ZONE, "In", Z1, Z2, Z3)],
    )
    c.provision([p])
    assert c.expect_scheduled(p).labels[ZONE] == Z3


def test_well_known_combines_multidimensional_selectors_preferences_and_requirements():
    """Karpenter suite_test.go: Well Known Labels "should combine multidimensional node selectors, preferences
    and requirements"."""
    c = cluster()
    p = pod(
        node_selector={ZONE: Z3, INSTANCE_TYPE: ARM_TYPE},
        node_requirements=[req(ZONE, "In", Z1, Z3), req(INSTANCE_TYPE, "In", DEFAULT_TYPE, ARM_TYPE)],
        node_preferences=[req(ZONE, "NotIn", "unknown"), req(INSTANCE_TYPE, "NotIn", "unknown")],
    )
    c.provision([p])
    node = c.expect_scheduled(p)
    assert (node.labels[ZONE], node.labels[INSTANCE_TYPE]) == (Z3, ARM_TYPE)


# --- Custom Constraints: Constraints Validation ---------------------------------------------------


def test_validation_does_not_schedule_restricted_labels():
    """Karpenter suite_test.go: Constraints Validation "should not schedule pods that have node selectors with
    restricted labels"."""
    c = cluster()
    for label in (HOSTNAME,):
        p = pod(node_requirements=[req(label, "In", "test")])
        c.provision([p])
        c.expect_not_scheduled(p)


def test_validation_does_not_schedule_restricted_domains():
    """Karpenter suite_test.go: Constraints Validation "should not schedule pods that have node selectors with
    restricted domains" (karpenter.sh; v1alpha5 also restricts kubernetes.io and k8s.io)."""
    c = cluster()
    for domain in ("karpenter.sh", "kubernetes.io", "k8s.io"):
        p = pod(node_requirements=[req(f"{domain}/test", "In", "test")])
        c.provision([p])
        c.expect_not_scheduled(p)


@not_ported(
    "should schedule pods that have node selectors with label in the kubernetes domains",
    "should schedule pods that have node selectors with label in subdomain from kubernetes domains",
    reason="v1alpha5 restricts the kubernetes.io and k8s.io label domains (subdomains included) in "
    "Provisioner labels and requirements; NodePools only restrict karpenter.sh",
)
def test_validation_kubernetes_domain_labels(title):
    """Karpenter suite_test.go: Constraints Validation (each test named by `title`)."""


def test_validation_schedules_well_known_label_selectors():
    """Karpenter suite_test.go: Constraints Validation "should schedule pods that have node selectors with
    label in wellknown label list"."""
    c = cluster()
    batch = [
        pod(node_selector={ZONE: Z1}),
        pod(node_selector={INSTANCE_TYPE: DEFAULT_TYPE}),
        pod(node_selector={ARCH: "arm64"}),
        pod(node_selector={OS: "linux"}),
        pod(node_selector={CAPACITY_TYPE: SPOT}),
    ]
    c.provision(batch)
    for p in batch:
        c.expect_scheduled(p)


# --- Custom Constraints: Scheduling Logic ---------------------------------------------------------


@pytest.mark.skip(reason="v1alpha5 Provisioners have no readiness status condition (NodePool Ready)")
def test_logic_not_ready_provisioner():
    """Karpenter suite_test.go: Scheduling Logic "should not schedule pods with nodePool which is
    not ready "."""


def test_logic_in_with_undefined_key():
    """Karpenter suite_test.go: Scheduling Logic "should not schedule pods that have node selectors with In
    operator and undefined key"."""
    c = cluster()
    p = pod(node_requirements=[req(KEY, "In", VALUE)])
    c.provision([p])
    c.expect_not_scheduled(p)


def test_logic_not_in_with_undefined_key():
    """Karpenter suite_test.go: Scheduling Logic "should schedule pods that have node selectors with NotIn
    operator and undefined key"."""
    c = cluster()
    p = pod(node_requirements=[req(KEY, "NotIn", VALUE)])
    c.provision([p])
    assert c.expect_scheduled(p).labels.get(KEY) != VALUE


def test_logic_exists_with_undefined_key():
    """Karpenter suite_test.go: Scheduling Logic "should not schedule pods that have node selectors with
    Exists operator and undefined key"."""
    c = cluster()
    p = pod(node_requirements=[req(KEY, "Exists")])
    c.provision([p])
    c.expect_not_scheduled(p)


def test_logic_does_not_exist_with_undefined_key():
    """Karpenter suite_test.go: Scheduling Logic "should schedule pods that with DoesNotExists operator and
    undefined key"."""
    c = cluster()
    p = pod(node_requirements=[req(KEY, "DoesNotExist")])
    c.provision([p])
    assert KEY not in c.expect_scheduled(p).labels


def test_logic_unconstrained_pod_gets_the_provisioner_label():
    """Karpenter suite_test.go: Scheduling Logic "should schedule unconstrained pods that don't have matching
    node selectors"."""
    c = labelled(VALUE)
    p = pod()
    c.provision([p])
    assert c.expect_scheduled(p).labels[KEY] == VALUE


def test_logic_matching_value_in():
    """Karpenter suite_test.go: Scheduling Logic "should schedule pods that have node selectors with matching
    value and In operator"."""
    c = labelled(VALUE)
    p = pod(node_requirements=[req(KEY, "In", VALUE)])
    c.provision([p])
    assert c.expect_scheduled(p).labels[KEY] == VALUE


def test_logic_matching_value_not_in():
    """Karpenter suite_test.go: Scheduling Logic "should not schedule pods that have node selectors with
    matching value and NotIn operator"."""
    c = labelled(VALUE)
    p = pod(node_requirements=[req(KEY, "NotIn", VALUE)])
    c.provision([p])
    c.expect_not_scheduled(p)


def test_logic_exists_with_defined_key():
    """Karpenter suite_test.go: Scheduling Logic "should schedule the pod with Exists operator and defined
    key"."""
    c = labelled(VALUE)
    p = pod(node_requirements=[req(KEY, "Exists")])
    c.provision([p])
    c.expect_scheduled(p)


def test_logic_does_not_exist_with_defined_key():
    """Karpenter suite_test.go: Scheduling Logic "should not schedule the pod with DoesNotExists operator and
    defined key"."""
    c = labelled(VALUE)
    p = pod(node_requirements=[req(KEY, "DoesNotExist")])
    c.provision([p])
    c.expect_not_scheduled(p)


def test_logic_different_value_in():
    """Karpenter suite_test.go: Scheduling Logic "should not schedule pods that have node selectors with
    different value and In operator"."""
    c = labelled(VALUE)
    p = pod(node_requirements=[req(KEY, "In", "another-value")])
    c.provision([p])
    c.expect_not_scheduled(p)


def test_logic_different_value_not_in():
    """Karpenter suite_test.go: Scheduling Logic "should schedule pods that have node selectors with different
    value and NotIn operator"."""
    c = labelled(VALUE)
    p = pod(node_requirements=[req(KEY, "NotIn", "another-value")])
    c.provision([p])
    assert c.expect_scheduled(p).labels[KEY] == VALUE


def test_logic_compatible_pods_share_a_node():
    """Karpenter suite_test.go: Scheduling Logic "should schedule compatible pods to the same node".

    The NodePool requires test-key In [test-value, another-value]: two Provisioners, one per value.
    """
    c = labelled(VALUE, "another-value")
    first = pod(node_requirements=[req(KEY, "In", VALUE)])
    second = pod(node_requirements=[req(KEY, "NotIn", "another-value")])
    c.provision([first, second])
    n1, n2 = c.expect_scheduled(first), c.expect_scheduled(second)
    assert n1.labels[KEY] == n2.labels[KEY] == VALUE
    assert n1.name == n2.name


def test_logic_incompatible_pods_get_different_nodes():
    """Karpenter suite_test.go: Scheduling Logic "should schedule incompatible pods to the different node"."""
    c = labelled(VALUE, "another-value")
    first = pod(node_requirements=[req(KEY, "In", VALUE)])
    second = pod(node_requirements=[req(KEY, "In", "another-value")])
    c.provision([first, second])
    n1, n2 = c.expect_scheduled(first), c.expect_scheduled(second)
    assert (n1.labels[KEY], n2.labels[KEY]) == (VALUE, "another-value")
    assert n1.name != n2.name


def test_logic_exists_does_not_overwrite_the_existing_value():
    """Karpenter suite_test.go: Scheduling Logic "Exists operator should not overwrite the existing value"."""
    c = cluster()
    p = pod(node_requirements=[req(ZONE, "In", "non-existent-zone"), req(ZONE, "Exists")])
    c.provision([p])
    c.expect_not_scheduled(p)


# --- Preferential Fallback ------------------------------------------------------------------------


def test_fallback_does_not_relax_the_final_required_term():
    """Karpenter suite_test.go: Preferential Fallback / Required "should not relax the final term"."""
    c = cluster(requirements=[zones_requirement(Z1), req(INSTANCE_TYPE, "In", DEFAULT_TYPE)])
    p = pod(node_requirements=[req(ZONE, "In", "invalid")])
    c.provision([p])
    c.expect_not_scheduled(p)


def test_fallback_relaxes_multiple_required_terms():
    """Karpenter suite_test.go: Preferential Fallback / Required "should relax multiple terms"."""
    c = cluster()
    p = pod(
        required_terms=[
            [req(ZONE, "In", "invalid")],
            [req(ZONE, "In", "invalid")],
            [req(ZONE, "In", Z1)],
            [req(ZONE, "In", Z2)],  # ORed: never reached
        ]
    )
    c.provision([p])
    assert c.expect_scheduled(p).labels[ZONE] == Z1


def test_fallback_relaxes_all_preferred_terms():
    """Karpenter suite_test.go: Preferential Fallback / Preferred "should relax all terms"."""
    c = cluster()
    p = pod(preferred_terms=[(1, [req(ZONE, "In", "invalid")]), (1, [req(INSTANCE_TYPE, "In", "invalid")])])
    c.provision([p])
    c.expect_scheduled(p)


def test_fallback_relaxes_to_lighter_weights():
    """Karpenter suite_test.go: Preferential Fallback / Preferred "should relax to use lighter weights"."""
    c = cluster(requirements=[zones_requirement(Z1, Z2)])
    p = pod(
        preferred_terms=[
            (100, [req(INSTANCE_TYPE, "In", "test-zone-3")]),
            (50, [req(ZONE, "In", Z2)]),
            (1, [req(ZONE, "In", Z1)]),  # never reached
        ]
    )
    c.provision([p])
    assert c.expect_scheduled(p).labels[ZONE] == Z2


def test_fallback_schedules_with_a_preference_conflicting_with_a_requirement():
    """Karpenter suite_test.go: Preferential Fallback / Preferred "should schedule even if preference is
    conflicting with requirement"."""
    c = cluster()
    p = pod(node_requirements=[req(ZONE, "In", Z3)], preferred_terms=[(1, [req(ZONE, "NotIn", Z3)])])
    c.provision([p])
    assert c.expect_scheduled(p).labels[ZONE] == Z3


def test_fallback_schedules_with_conflicting_preference_requirements():
    """Karpenter suite_test.go: Preferential Fallback / Preferred "should schedule even if preference
    requirements are conflicting"."""
    c = cluster()
    p = pod(node_preferences=[req(ZONE, "In", "invalid"), req(ZONE, "NotIn", "invalid")])
    c.provision([p])
    c.expect_scheduled(p)


# --- Instance Type Compatibility ------------------------------------------------------------------


def test_compat_does_not_schedule_more_than_any_type_has():
    """Karpenter suite_test.go: Instance Type Compatibility "should not schedule if requesting more resources
    than any instance type has"."""
    c = cluster()
    p = pod(cpu="512")
    c.provision([p])
    c.expect_not_scheduled(p)


def test_compat_different_archs_on_different_instances():
    """Karpenter suite_test.go: Instance Type Compatibility "should launch pods with different archs on
    different instances"."""
    c = cluster(requirements=[req(ARCH, "In", "arm64", "amd64")])
    batch = [pod(node_selector={ARCH: "amd64"}), pod(node_selector={ARCH: "arm64"})]
    c.provision(batch)
    assert len({c.expect_scheduled(p).name for p in batch}) == 2


def test_compat_excludes_types_unsupported_by_pod_instance_type_affinity():
    """Karpenter suite_test.go: Instance Type Compatibility "should exclude instance types that are not
    supported by the pod constraints (node affinity/instance type)"."""
    c = cluster(requirements=[req(ARCH, "In", "amd64")])
    p = pod(node_requirements=[req(INSTANCE_TYPE, "In", ARM_TYPE)])
    c.provision([p])
    c.expect_not_scheduled(p)


def test_compat_excludes_types_unsupported_by_pod_os_affinity():
    """Karpenter suite_test.go: Instance Type Compatibility "should exclude instance types that are not
    supported by the pod constraints (node affinity/operating system)"."""
    c = cluster(requirements=[req(ARCH, "In", "amd64")])
    p = pod(node_requirements=[req(OS, "In", "ios")])
    c.provision([p])
    c.expect_not_scheduled(p)


def test_compat_excludes_types_unsupported_by_provisioner_arch():
    """Karpenter suite_test.go: Instance Type Compatibility "should exclude instance types that are not
    supported by the provider constraints (arch)".

    Karpenter's fake catalog has a single type with 14 vCPU to spare, an arm64 one; here the NodePool's types
    are c5.xlarge and m6g.8xlarge, so again only an arm64 type is big enough.
    """
    c = cluster(requirements=[req(ARCH, "In", "amd64"), req(INSTANCE_TYPE, "In", "c5.xlarge", "m6g.8xlarge")])
    p = pod(limits={"cpu": "14"})
    c.provision([p])
    c.expect_not_scheduled(p)


@pytest.mark.skip(
    reason="karpy's instance types are Linux only (Karpenter 0.5 AWS: kubernetes.io/os is always linux)"
)
def test_compat_different_operating_systems_on_different_instances():
    """Karpenter suite_test.go: Instance Type Compatibility "should launch pods with different operating
    systems on different instances"."""


def test_compat_different_instance_type_selectors_on_different_instances():
    """Karpenter suite_test.go: Instance Type Compatibility "should launch pods with different instance type
    node selectors on different instances" (one selector uses the deprecated beta label, as Karpenter's)."""
    c = cluster(requirements=[req(ARCH, "In", "arm64", "amd64")])
    batch = [
        pod(node_selector={"beta.kubernetes.io/instance-type": SMALL_TYPE}),
        pod(node_selector={INSTANCE_TYPE: DEFAULT_TYPE}),
    ]
    c.provision(batch)
    nodes = [c.expect_scheduled(p) for p in batch]
    assert [n.labels[INSTANCE_TYPE] for n in nodes] == [SMALL_TYPE, DEFAULT_TYPE]
    assert nodes[0].name != nodes[1].name


def test_compat_different_zone_selectors_on_different_instances():
    """Karpenter suite_test.go: Instance Type Compatibility "should launch pods with different zone selectors
    on different instances"."""
    c = cluster(requirements=[req(ARCH, "In", "arm64", "amd64")])
    batch = [pod(node_selector={ZONE: Z1}), pod(node_selector={ZONE: Z2})]
    c.provision(batch)
    assert len({c.expect_scheduled(p).name for p in batch}) == 2


def test_compat_resources_on_no_single_type_go_to_different_instances():
    """Karpenter suite_test.go: Instance Type Compatibility "should launch pods with resources that aren't on
    any single instance type on different instances" (Karpenter's two fake GPU resources -> nvidia.com/gpu and
    aws.amazon.com/neuron, which no fixture type has together)."""
    c = cluster()
    batch = [pod(limits={"nvidia.com/gpu": "1"}), pod(limits={"aws.amazon.com/neuron": "1"})]
    c.provision(batch)
    assert len({c.expect_scheduled(p).name for p in batch}) == 2


def test_compat_fails_a_pod_whose_resources_are_on_no_single_type():
    """Karpenter suite_test.go: Instance Type Compatibility "should fail to schedule a pod with resources
    requests that aren't on a single instance type"."""
    c = cluster()
    p = pod(limits={"nvidia.com/gpu": "1", "aws.amazon.com/neuron": "1"})
    c.provision([p])
    c.expect_not_scheduled(p)


@not_ported(
    "should filter instance types that match labels",
    "should not schedule with incompatible labels",
    "should schedule optional labels",
    "should schedule without optional labels if disallowed",
    reason="karpy's instance types carry only the well-known labels (no provider-specific labels like "
    "Karpenter's fake `size`/`special`), and v1alpha5 requirements only use well-known keys",
)
def test_compat_provider_specific_labels(title):
    """Karpenter suite_test.go: Instance Type Compatibility / Provider Specific Labels (each test named by
    `title`)."""


# --- Binpacking -----------------------------------------------------------------------------------


def _assert_cheapest_type(node, **requests: float) -> None:
    expected = _cheapest_holding(**requests)
    assert node.instance_type == expected.name, (
        f"{node.instance_type} is not the cheapest type holding {requests}"
    )


def test_binpacking_small_pod_on_the_smallest_instance():
    """Karpenter suite_test.go: Binpacking "should schedule a small pod on the smallest instance"."""
    c = cluster()
    p = pod(memory="100M")
    c.provision([p])
    _assert_cheapest_type(c.expect_scheduled(p), memory=100e6)


def test_binpacking_small_pod_on_the_smallest_possible_instance_type():
    """Karpenter suite_test.go: Binpacking "should schedule a small pod on the smallest possible instance
    type"."""
    c = cluster()
    p = pod(memory="2000M")
    c.provision([p])
    _assert_cheapest_type(c.expect_scheduled(p), memory=2000e6)


def test_binpacking_takes_pod_overhead_into_account():
    """Karpenter suite_test.go: Binpacking "should take pod runtime class into consideration" (the
    RuntimeClass admission plugin writes its podFixed overhead into spec.overhead, which the pod carries
    here)."""
    c = cluster()
    p = pod(cpu="1", overhead={"cpu": "2"})
    c.provision([p])
    node = c.expect_scheduled(p)
    _assert_cheapest_type(node, cpu=3)


def test_binpacking_multiple_small_pods_on_the_smallest_possible_type():
    """Karpenter suite_test.go: Binpacking "should schedule multiple small pods on the smallest possible
    instance type"."""
    c = cluster()
    batch = pods(5, memory="10M")
    c.provision(batch)
    nodes = {c.expect_scheduled(p).name for p in batch}
    assert len(nodes) == 1
    _assert_cheapest_type(c.expect_scheduled(batch[0]), memory=50e6, pods=5)


def _per_node(type_name: str, memory: float) -> int:
    t = next(t for t in catalog() if t.name == type_name)
    return int(t.allocatable.memory // memory)


def test_binpacking_creates_new_nodes_at_capacity():
    """Karpenter suite_test.go: Binpacking "should create new nodes when a node is at capacity".

    Karpenter's 40 pods of 1.8G fill twenty 4Gi default-instance-type nodes. Here the NodePool is held to
    m5.large (the "default" type); the node count follows from its allocatable memory.
    """
    c = cluster(requirements=[req(INSTANCE_TYPE, "In", DEFAULT_TYPE)])
    batch = pods(40, memory="1.8G", node_selector={ARCH: "amd64"})
    c.provision(batch)
    nodes = {c.expect_scheduled(p).name for p in batch}
    assert all(n.instance_type == DEFAULT_TYPE for n in c.nodes)
    assert len(nodes) == math.ceil(40 / _per_node(DEFAULT_TYPE, 1.8e9))


def test_binpacking_packs_small_and_large_pods_together():
    """Karpenter suite_test.go: Binpacking "should pack small and large pods together".

    Sizes scaled to the type: two large pods leave room for exactly one small one on each node.
    """
    c = cluster(requirements=[req(INSTANCE_TYPE, "In", DEFAULT_TYPE)])
    memory = next(t for t in catalog() if t.name == DEFAULT_TYPE).allocatable.memory
    large, small = int(memory * 0.45), int(memory * 0.08)
    batch = pods(40, memory=str(large), node_selector={ARCH: "amd64"})
    batch += pods(20, memory=str(small), node_selector={ARCH: "amd64"})
    c.provision(batch)
    nodes = {c.expect_scheduled(p).name for p in batch}
    assert all(n.instance_type == DEFAULT_TYPE for n in c.nodes)
    assert len(nodes) == 20


def test_binpacking_packs_nodes_tightly():
    """Karpenter suite_test.go: Binpacking "should pack nodes tightly".

    Karpenter's 4.5-vCPU pod nearly fills its largest fake type; here the NodePool's largest type is a
    c5.2xlarge (7.81 allocatable) and the big pod asks 7 vCPU: the 1-vCPU pod needs a second, smaller node.
    """
    c = cluster(requirements=[req(INSTANCE_TYPE, "In", "c5.large", "c5.xlarge", "c5.2xlarge")])
    big, little = pod(cpu="7"), pod(cpu="1")
    c.provision([big, little])
    n1, n2 = c.expect_scheduled(big), c.expect_scheduled(little)
    assert n1.name != n2.name
    assert n1.instance_type != n2.instance_type


def test_binpacking_handles_zero_quantity_resource_requests():
    """Karpenter suite_test.go: Binpacking "should handle zero-quantity resource requests"."""
    c = cluster()
    p = pod(requests={"foo.com/weird-resources": "0"}, limits={"foo.com/weird-resources": "0"})
    c.provision([p])
    c.expect_scheduled(p)


def test_binpacking_creates_new_nodes_at_the_pod_limit():
    """Karpenter suite_test.go: Binpacking "should create new nodes when a node is at capacity due to pod
    limits per node" (Karpenter's fake types hold 5 pods: kubelet maxPods 5 here)."""
    c = cluster(max_pods=5)
    batch = pods(25, memory="1m", cpu="1m", node_selector={ARCH: "amd64"})
    c.provision(batch)
    nodes = {c.expect_scheduled(p).name for p in batch}
    assert len(nodes) == 5
    assert len({n.instance_type for n in c.nodes}) == 1


def _with_init_container(init_memory: str) -> dict[str, Any]:
    """Options of a 1-vCPU/1Gi pod whose init container requests 2 vCPU and `init_memory`."""
    return {
        "cpu": "1",
        "memory": "1Gi",
        "init_containers": [{"name": "init", "resources": {"requests": {"cpu": "2", "memory": init_memory}}}],
    }


def test_binpacking_counts_init_container_requests():
    """Karpenter suite_test.go: Binpacking "should take into account initContainer resource requests when
    binpacking"."""
    c = cluster()
    p = pod(**_with_init_container("1Gi"))
    c.provision([p])
    _assert_cheapest_type(c.expect_scheduled(p), cpu=2, memory=2**30)


@pytest.mark.parametrize(
    "pod_options",
    [
        pytest.param({"memory": "2Ti"}, id="requests"),
        pytest.param(_with_init_container("2Ti"), id="init-container"),
    ],
)
def test_binpacking_does_not_schedule_pods_larger_than_every_type(pod_options):
    """Karpenter suite_test.go: Binpacking "should not schedule pods that exceed every instance type's
    capacity" (requests) and "should not schedule pods when initContainer resource requests are greater than
    available instance types" (init-container; 2Ti rather than 1Ti: the fixture catalog has types above
    1Ti)."""
    c = cluster()
    p = pod(**pod_options)
    c.provision([p])
    c.expect_not_scheduled(p)


def test_binpacking_selects_valid_types_regardless_of_price():
    """Karpenter suite_test.go: Binpacking "should select for valid instance types, regardless of price".

    Three types whose prices do not follow their size (the 8-vCPU one is the cheapest): every one holding the
    pod is an option, cheapest first.
    """
    prices = {"c5.large": 2.0, "c5.xlarge": 3.0, "c5.2xlarge": 1.0}
    types = [
        t.with_offerings([Offering(Z1, ON_DEMAND, prices[t.name])]) for t in catalog() if t.name in prices
    ]
    p = pod(limits={"cpu": "1m", "memory": "1Mi"})
    plan = solve([p], [provisioner()], types)
    assert [n.instance_type.name for n in plan.nodes] == ["c5.2xlarge"]
    assert [t.name for t in plan.nodes[0].options] == ["c5.2xlarge", "c5.large", "c5.xlarge"]


# --- In-Flight Nodes ------------------------------------------------------------------------------


def test_in_flight_no_second_node_when_the_first_holds_the_pod():
    """Karpenter suite_test.go: In-Flight Nodes "should not launch a second node if there is an in-flight node
    that can support the pod"."""
    c = cluster()
    first, second = pod(limits={"cpu": "10m"}), pod(limits={"cpu": "10m"})
    c.provision([first])
    c.provision([second])
    assert c.expect_scheduled(first).name == c.expect_scheduled(second).name


def test_in_flight_no_second_node_when_the_first_holds_the_pod_node_selectors():
    """Karpenter suite_test.go: In-Flight Nodes "should not launch a second node if there is an in-flight node
    that can support the pod (node selectors)"."""
    c = cluster()
    first = pod(limits={"cpu": "10m"}, node_requirements=[req(ZONE, "In", Z2)])
    c.provision([first])
    second = pod(limits={"cpu": "10m"}, node_requirements=[req(ZONE, "In", Z1, Z2)])
    c.provision([second])
    assert c.expect_scheduled(first).name == c.expect_scheduled(second).name
    third = pod(limits={"cpu": "10m"}, node_requirements=[req(ZONE, "In", Z1, Z3)])
    c.provision([third])
    assert c.expect_scheduled(third).name != c.expect_scheduled(first).name


def test_in_flight_second_node_when_the_pod_does_not_fit():
    """Karpenter suite_test.go: In-Flight Nodes "should launch a second node if a pod won't fit on the
    existingNodes node".

    Karpenter's first pod (1001m) lands on a 2-vCPU type; here the second pod asks what is left on the first
    node plus 1m.
    """
    c = cluster()
    first = pod(limits={"cpu": "1001m"})
    c.provision([first])
    node = c.expect_scheduled(first)
    room = node.allocatable.cpu - node.requested.cpu
    second = pod(limits={"cpu": f"{math.floor(room * 1000) + 1}m"})
    c.provision([second])
    assert c.expect_scheduled(second).name != node.name


def test_in_flight_second_node_when_the_pod_is_incompatible():
    """Karpenter suite_test.go: In-Flight Nodes "should launch a second node if a pod isn't compatible with
    the existingNodes node (node selector)"."""
    c = cluster(requirements=[req(ARCH, "In", "amd64", "arm64")])
    first = pod(limits={"cpu": "10m"}, node_selector={ARCH: "amd64"})
    c.provision([first])
    second = pod(node_selector={ARCH: "arm64"})
    c.provision([second])
    assert c.expect_scheduled(second).name != c.expect_scheduled(first).name


def _empty_in_flight_node(c: Cluster, cpu: str) -> ExistingNode:
    """A node launched for a pod with a `cpu` limit, the pod then deleted: in flight, and empty."""
    first = pod(limits={"cpu": cpu})
    c.provision([first])
    node = c.expect_scheduled(first)
    c.delete_pod(first)
    return node


def test_in_flight_second_node_when_the_first_is_terminating():
    """Karpenter suite_test.go: In-Flight Nodes "should launch a second node if an in-flight node is
    terminating" (a node being deleted is passed schedulable=False)."""
    c = cluster()
    node = _empty_in_flight_node(c, "10m")
    c.replace_node(node.name, schedulable=False)
    second = pod(limits={"cpu": "10m"})
    c.provision([second])
    assert c.expect_scheduled(second).name != node.name


def test_in_flight_balances_zones():
    """Karpenter suite_test.go: In-Flight Nodes / Topology "should balance pods across zones with in-flight
    nodes"."""
    labels = {"foo": "bar"}
    constraint = spread(ZONE, selector={"matchLabels": labels})
    c = cluster()
    c.provision(pods(4, labels=labels, spreads=[constraint]))
    assert c.skew(constraint) == [1, 1, 2]
    first_round = len(c.nodes)
    c.provision(pods(5, labels=labels, spreads=[constraint]))
    assert c.skew(constraint) == [3, 3, 3]
    assert len(c.nodes) == first_round


def test_in_flight_balances_hostnames():
    """Karpenter suite_test.go: In-Flight Nodes / Topology "should balance pods across hostnames with
    in-flight nodes"."""
    labels = {"foo": "bar"}
    constraint = spread(HOSTNAME, selector={"matchLabels": labels})
    c = cluster()
    c.provision(pods(4, labels=labels, spreads=[constraint]))
    assert c.skew(constraint) == [1, 1, 1, 1]
    c.provision(pods(5, labels=labels, spreads=[constraint]))
    # New nodes rather than a second pod on the in-flight ones: skew 1 allows both, new nodes are kept.
    assert c.skew(constraint) == [1] * 9


def test_in_flight_taints_schedules_to_an_untainted_in_flight_node():
    """Karpenter suite_test.go: In-Flight Nodes / Taints "should assume pod will schedule to a tainted node
    with no taints"."""
    c = cluster()
    node = _empty_in_flight_node(c, "8")
    second = pod()
    c.provision([second])
    assert c.expect_scheduled(second).name == node.name


def test_in_flight_taints_does_not_schedule_to_a_tainted_node():
    """Karpenter suite_test.go: In-Flight Nodes / Taints "should not assume pod will schedule to a tainted
    node"."""
    c = cluster()
    node = _empty_in_flight_node(c, "8")
    c.replace_node(node.name, taints=(*node.taints, Taint("foo.com/taint", "tainted", "NoSchedule")))
    second = pod()
    c.provision([second])
    assert c.expect_scheduled(second).name != node.name


_INITIALIZATION = (
    "which taints of an in-flight node are ephemeral (not-ready, startup taints before initialization) is "
    "decided by the controller when it builds ExistingNode; solve() takes a node's taints as given. karpy "
    "leaves a startup taint out for as long as the node carries it (it does not track initialization "
    "there): a pod it then plans onto such a node is left to kube-scheduler, which waits for the taint"
)


def test_in_flight_taints_a_custom_startup_taint_is_assumed_gone():
    """Karpenter suite_test.go: In-Flight Nodes / Taints "should assume pod will schedule to a tainted node
    with a custom startup taint": the node as the controller's inventory sees it (its NodePool's startup
    taint recorded on it at launch) takes the pod."""
    c = cluster()
    node = _empty_in_flight_node(c, "8")
    startup = Taint("foo.com/taint", "tainted", "NoSchedule")
    live = Node(
        name=node.name,
        labels=node.labels,
        taints=(*node.taints, startup),
        annotations={wk.STARTUP_TAINTS_ANNOTATION: format_taints((startup,))},
    )
    assert live.is_karpy
    seen = inventory.existing_node(live, inventory.node_pods([]), schedulable=True)
    c.replace_node(node.name, taints=seen.taints)
    second = pod()
    c.provision([second])
    assert c.expect_scheduled(second).name == node.name


@not_ported(
    "should assume pod will schedule to a node with ephemeral taint "
    "node.kubernetes.io/not-ready:NoExecute when the node is uninitialized",
    "should not assume pod will schedule to a node with startup taints after initialization",
    "should consider a tainted NotReady node as in-flight even if initialized",
    reason=_INITIALIZATION,
)
def test_in_flight_taints_initialization(title):
    """Karpenter suite_test.go: In-Flight Nodes / Taints (each test named by `title`)."""


def test_in_flight_daemonset_pods_already_bound_are_not_counted_twice():
    """Karpenter suite_test.go: In-Flight Nodes / Daemonsets "should track daemonset usage separately so we
    know how many DS resources are remaining to be scheduled".

    Karpenter's 16-vCPU node keeps 14.9 vCPU after its DaemonSet pod binds; here the second pod asks all the
    node has left once the DaemonSet pod is bound, and must still go to that node.
    """
    c = cluster()
    daemon = pod(cpu="1", memory="1Gi", owner_kind="DaemonSet")
    first = pod(limits={"cpu": "8"})
    c.provision([first], daemonsets=[daemon])
    node = c.expect_scheduled(first)
    c.delete_pod(first)
    bound = pod(cpu="1", memory="2Gi", owner_kind="DaemonSet")
    c.replace_node(node.name, pods=(bound,), requested=bound.requests, pod_count=1)
    room = node.allocatable.cpu - 1
    second = pod(limits={"cpu": f"{math.floor(room * 1000)}m"})
    c.provision([second], daemonsets=[daemon])
    assert c.expect_scheduled(second).name == node.name


@pytest.mark.skip(
    reason="asserts Karpenter's cluster-state accounting (StateNode.DaemonSetRequests/Available), which has "
    "no counterpart: karpy's ExistingNode.requested already includes every bound pod"
)
def test_in_flight_daemonset_unexpected_pods_binding():
    """Karpenter suite_test.go: In-Flight Nodes / Daemonsets "should handle unexpected daemonset pods binding
    to the node"."""


@pytest.mark.skip(
    reason="DaemonSet pods requiring karpenter.sh/initialized|registered: v1alpha5 nodes carry neither label"
)
def test_in_flight_daemonset_initialized_registered_affinity():
    """Karpenter suite_test.go: In-Flight Nodes / Daemonsets "Should properly handle DaemonSet resources with
    Node Affinity for `karpenter.sh/initialized` and `karpenter.sh/registered`"."""


def test_in_flight_packs_in_flight_nodes_before_launching_new_ones():
    """Karpenter suite_test.go: In-Flight Nodes "should pack in-flight nodes before launching new nodes".

    Karpenter's single type holds four 1-vCPU pods; here the NodePool is held to c5.xlarge (three). Batches of
    random sizes (seeded); at the end at most one node has a vCPU to spare.
    """
    rng = random.Random(11)
    c = cluster(requirements=[req(INSTANCE_TYPE, "In", "c5.xlarge")])
    for _ in range(10):
        batch = pods(rng.randrange(10), limits={"cpu": "1"})
        c.provision(batch)
        for p in batch:
            c.expect_scheduled(p)
    spare = [n for n in c.nodes if n.allocatable.cpu - n.requested.cpu >= 1]
    assert len(spare) <= 1


def test_in_flight_no_second_node_for_a_pod_planned_but_not_bound():
    """Karpenter suite_test.go: In-Flight Nodes "should not launch a second node if there is an in-flight node
    that can support the pod (#2011)" (the pod was planned onto the node but never bound)."""
    c = cluster()
    p = pod(limits={"cpu": "10m"})
    c.provision([p])
    c.delete_pod(p)
    c.provision([p])
    assert len(c.nodes) == 1


@not_ported(
    "should order initialized nodes for scheduling uninitialized nodes when all other nodes are inflight",
    "should order initialized nodes for scheduling uninitialized nodes",
    reason="ExistingNode has no initialized/uninitialized state to order by",
)
def test_in_flight_initialized_first(title):
    """Karpenter suite_test.go: In-Flight Nodes / Existing Nodes (each test named by `title`)."""


def test_in_flight_same_host_port_on_different_nodes():
    """Karpenter suite_test.go: In-Flight Nodes "should schedule pods with the same host port to different
    nodes"."""
    c = cluster()
    batch = [pod(host_ports=[8080]), pod(host_ports=[8080])]
    c.provision(batch)
    assert c.expect_scheduled(batch[0]).name != c.expect_scheduled(batch[1]).name


# --- Existing Nodes -------------------------------------------------------------------------------


@not_ported(
    "should schedule a pod to an existing node unowned by Karpenter",
    "should schedule multiple pods to an existing node unowned by Karpenter",
    reason="karpy binds only to its own nodes: a node it does not own is passed schedulable=False "
    "(kube-scheduler places pods there)",
)
def test_existing_unowned_nodes(title):
    """Karpenter suite_test.go: Existing Nodes (each test named by `title`)."""


def _add_owned_node(c: Cluster, **allocatable: str) -> None:
    """Node "owned": karpy's own (Provisioner default), schedulable, with `allocatable` and 110 pods."""
    c.add_node("owned", allocatable={**allocatable, "pods": "110"}, schedulable=True, provisioner="default")


def test_existing_pod_incompatible_with_the_node_but_compatible_with_a_provisioner():
    """Karpenter suite_test.go: Existing Nodes "should consider a pod incompatible with an existing node but
    compatible with NodePool"."""
    c = Cluster()
    _add_owned_node(c, cpu="10", memory="10Gi")
    p = pod(node_requirements=[req(ZONE, "In", Z1)])
    c.provision([p])
    c.expect_not_scheduled(p)
    c.provision([p], [provisioner()])
    assert c.expect_scheduled(p).name != "owned"


def test_existing_daemonset_overhead_only_where_compatible():
    """Karpenter suite_test.go: Existing Nodes / Daemonsets "should not subtract daemonset overhead that is
    not strictly compatible with an existing node"."""
    c = cluster()
    _add_owned_node(c, cpu="1", memory="1Gi")
    daemon = pod(cpu="100", memory="100Gi", node_requirements=[req(ZONE, "In", Z1)], owner_kind="DaemonSet")
    first = pod(cpu="1", memory="1Gi")
    c.provision([first], daemonsets=[daemon])
    assert c.expect_scheduled(first).name == "owned"
    # A new node could be in zone-1, where the DaemonSet's 100 vCPU would not leave room for the pod.
    second = pod(cpu="1", memory="1Gi")
    c.provision([second], daemonsets=[daemon])
    c.expect_not_scheduled(second)


# --- Deleting Nodes -------------------------------------------------------------------------------


def test_deleting_node_active_pods_get_a_node_of_the_same_size():
    """Karpenter suite_test.go: Deleting Nodes "should re-schedule pods from a deleting node when pods are
    active" (the deleting node is passed schedulable=False; its active pod is planned again)."""
    c = cluster()
    p = pod(memory="100M")
    c.provision([p])
    node = c.expect_scheduled(p)
    c.delete_pod(p)
    c.replace_node(node.name, schedulable=False)
    c.provision([p])
    assert len(c.nodes) == 2
    assert {n.instance_type for n in c.nodes} == {node.instance_type}


def test_deleting_node_daemonset_pods_are_not_rescheduled():
    """Karpenter suite_test.go: Deleting Nodes "should not re-schedule pods from a deleting node when pods are
    owned by a DaemonSet"."""
    c = Cluster(provisioner())
    daemon_pod = pod(memory="100M", owner_kind="DaemonSet")
    c.add_node(
        "deleting",
        labels={INSTANCE_TYPE: SMALL_TYPE, CAPACITY_TYPE: ON_DEMAND, ZONE: Z1},
        allocatable={"cpu": "32"},
        schedulable=False,
        provisioner="default",
    )
    c.provision([daemon_pod])
    assert len(c.nodes) == 1


@not_ported(
    "should not re-schedule pods from a deleting node when pods are not active",
    "should not reschedule pods from a deleting node when pods are not active and they are owned by a "
    "ReplicaSet",
    "should reschedule pods from a deleting node when pods are not active and they are owned by a "
    "StatefulSet",
    "should not reschedule pods from a deleting node when pods are blocked due to fully blocking PDBs "
    "(Entries: 0 max unavailable, 0% max unavailable, 100% min available, multiple PDBs on the same pod)",
    reason="which pods of a deleting node are re-planned (terminating, owner kind, PDBs) is the lifecycle "
    "controller's choice before solve(); karpy's Pod carries no phase or deletionTimestamp",
)
def test_deleting_node_pod_selection(title):
    """Karpenter suite_test.go: Deleting Nodes (each test named by `title`)."""


# --- NodePool requirements instance filtering -----------------------------------------------------


def test_filtering_no_available_instance_types():
    """Karpenter suite_test.go: NodePool requirements instance filtering "should return appropriate pod error
    when no available instance types exist" (karpy's reason words differ; one is given)."""
    c = cluster()
    normal = pod()
    c.provision([normal])
    c.expect_scheduled(normal)
    p = pod(requests={"cpu": "32", "memory": "256Gi"}, limits={"cpu": "32", "memory": "256Gi"})
    c.provision([p], [provisioner(requirements=[req(INSTANCE_TYPE, "In", "non-existent-instance-type")])])
    c.expect_not_scheduled(p)
    assert c.reason(p)


def test_filtering_multiple_pods_with_no_instance_types():
    """Karpenter suite_test.go: NodePool requirements instance filtering "should handle multiple pods when
    requirements filter out all instance types"."""
    c = cluster(requirements=[req(ARCH, "In", "non-existent-arch")])
    batch = pods(3)
    c.provision(batch)
    for p in batch:
        c.expect_not_scheduled(p)
        assert c.reason(p)


def test_filtering_conflicting_requirements():
    """Karpenter suite_test.go: NodePool requirements instance filtering "should handle conflicting
    requirements that eliminate all instance types"."""
    c = cluster(requirements=[req(ARCH, "In", "amd64"), req(ARCH, "In", "arm64")])
    p = pod()
    c.provision([p])
    c.expect_not_scheduled(p)
    assert c.reason(p)


def test_filtering_zone_requirements():
    """Karpenter suite_test.go: NodePool requirements instance filtering "should handle zone requirements that
    filter out all instance types"."""
    c = cluster(requirements=[zones_requirement("non-existent-zone-1", "non-existent-zone-2")])
    p = pod()
    c.provision([p])
    c.expect_not_scheduled(p)
    assert c.reason(p)


# --- No Pre-Binding -------------------------------------------------------------------------------


def test_no_pre_binding_second_pod_uses_the_launched_node():
    """Karpenter suite_test.go: No Pre-Binding "should not bind pods to nodes" (the first pod is planned onto
    the node it launched but not bound; the second batch uses that node)."""
    c = cluster()
    first = pod(limits={"cpu": "10m"})
    c.provision([first])
    assert len(c.nodes) == 1
    c.delete_pod(first)
    second = pod(limits={"cpu": "10m"})
    c.provision([second])
    assert len(c.nodes) == 1


@pytest.mark.skip(
    reason="which allocatable an in-flight node reports before its kubelet registers extended resources "
    "is the controller's ExistingNode construction, not solve()"
)
def test_no_pre_binding_extended_resource_zeroing():
    """Karpenter suite_test.go: No Pre-Binding "should handle resource zeroing of extended resources by
    kubelet"."""


def test_no_pre_binding_self_pod_affinity_zone():
    """Karpenter suite_test.go: No Pre-Binding "should respect self pod affinity without pod binding
    (zone)"."""
    c = cluster()
    aff = {"security": "s2"}
    first, second = (pod(labels=aff, pod_requirements=[term(ZONE, aff)]) for _ in range(2))
    c.provision([first])
    c.delete_pod(first)
    c.provision([second])
    assert len(c.nodes) == 1


# --- Dynamic Resource Allocation ------------------------------------------------------------------


def _dra_pod(name: str, *, container: bool, init: bool) -> Pod:
    """Karpenter's DRA table pods; the claims are also declared in spec.resourceClaims, as the apiserver
    requires of any pod whose containers reference claims."""
    manifest = pod_manifest(
        name,
        cpu="1",
        memory="1Gi",
        init_containers=[{"name": "init", "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}}}],
    )
    spec = manifest["spec"]
    claims = []
    if container:
        spec["containers"][0]["resources"]["claims"] = [{"name": "gpu-claim"}]
        claims.append("gpu-claim")
    if init:
        spec["initContainers"][0]["resources"]["claims"] = [{"name": "storage-init-claim"}]
        claims.append("storage-init-claim")
    if claims:
        spec["resourceClaims"] = [{"name": c, "resourceClaimName": c} for c in claims]
    return Pod.from_manifest(manifest)


@pytest.mark.parametrize(
    ("entry", "container", "init"),
    [
        ("container with resource claims", True, False),
        ("init container with resource claims", False, True),
        ("pod with both container and init container resource claims", True, True),
        ("non-DRA pod without resource claims", False, False),
    ],
)
def test_dra_pods(entry, container, init):
    """Karpenter suite_test.go: Dynamic Resource Allocation (DRA) "should handle DRA pods correctly"
    (`entry`), as Karpenter runs it with its IgnoreDRARequests option on: the claims are ignored for
    placement and the pod gets a node (karpy: planned on every other rule, left to kube-scheduler to
    bind, which allocates the claims; issue 24). Karpenter's default refuses such pods instead."""
    p = _dra_pod(f"dra-{container}-{init}", container=container, init=init)
    plan = solve([p], [provisioner()], catalog())
    assert len(plan.nodes) == 1 and not plan.unschedulable
    if container or init:
        assert list(plan.left_to_scheduler()) == [p.key]
        assert "spec.resourceClaims" in plan.left_to_scheduler()[p.key][0]
    else:
        assert not plan.left_to_scheduler()


@pytest.mark.skip(reason="IgnoreDRARequests is a Karpenter operator option; karpy has no such switch")
def test_dra_daemonsets_ignore_dra_requests():
    """Karpenter suite_test.go: Dynamic Resource Allocation (DRA) "should handle DaemonSet pods with DRA
    requirements based on IgnoreDRARequests flag value"."""


# --- Not expressible: metrics, reserved capacity, offering overrides ------------------------------


@not_ported(
    "should surface the queueDepth metric while executing the scheduling loop",
    "should surface the UnschedulablePodsCount metric while executing the scheduling loop",
    "should surface the schedulingDuration metric after executing a scheduling loop",
    "should set the PodSchedulerDecisionSeconds metric after a scheduling loop",
    "Pending Pods by Effective Zone Metric: should report metric correctly for volume constraints "
    "(3 entries)",
    "Pending Pods by Effective Zone Metric: should report zone of pods corectly (10 entries)",
    reason="Karpenter's Prometheus metrics of its scheduling loop; solve() has no metrics",
)
def test_metrics(title):
    """Karpenter suite_test.go: Metrics (each test named by `title`)."""


@not_ported(
    "shouldn't fallback to on-demand or spot when compatible reserved offerings are available",
    "should correctly track reservations shared across nodepools",
    "should correctly track reservations for multiple nodepools with distinct reservations for the same "
    "instance pool",
    "should correctly track multiple reservations for the same instance pool",
    "shouldn't fallback to a lower weight NodePool if a reserved offering is available",
    "shouldn't relax preferences when a pod fails to schedule due to a reserved offering error",
    "should handle multiple pods on reserved nodes",
    reason="capacity reservations postdate v1alpha5; karpy's reserved offerings are tested on v1 terms in "
    "tests/unit/scheduling/test_reservations.py (the first, second and last of these among them)",
)
def test_reserved_instance_types(title):
    """Karpenter suite_test.go: Reserved Instance Types (each test named by `title`)."""


@not_ported(
    "should only select instance types whose offerings have CapacityOverride when pod requests an "
    "override resource",
    "should reject instance type when override allocatable fits but override offerings are unavailable",
    reason="offering capacity overrides (NodeOverlay) postdate v1alpha5",
)
def test_offering_overrides(title):
    """Karpenter suite_test.go: Offering Overrides (each test named by `title`)."""
