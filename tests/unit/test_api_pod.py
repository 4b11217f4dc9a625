"""Pod.from_manifest: requests arithmetic, affinity parsing, errors naming pod and field."""

import pytest

from extender.api.pod import Pod, PodError


def manifest(**spec):
    return {
        "metadata": {"name": "web-0", "namespace": "shop"},
        "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}], **spec},
    }


def test_requests_are_sum_of_containers_max_init_plus_overhead():
    pod = Pod.from_manifest(
        manifest(
            containers=[
                {"name": "a", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
                {"name": "b", "resources": {"requests": {"cpu": "500m"}}},
            ],
            initContainers=[{"name": "i", "resources": {"requests": {"cpu": "2"}}}],
            overhead={"memory": "128Mi"},
        )
    )
    assert pod.requests.cpu == 2 and pod.requests.memory == 2**30 + 128 * 2**20
    assert pod.key == "shop/web-0"


def test_gpu_limit_counts_as_request():
    pod = Pod.from_manifest(
        manifest(containers=[{"name": "g", "resources": {"limits": {"nvidia.com/gpu": 1}}}])
    )
    assert pod.requests.get("nvidia.com/gpu") == 1


def test_bad_quantity_names_pod_and_field():
    with pytest.raises(PodError) as err:
        Pod.from_manifest(manifest(containers=[{"name": "c", "resources": {"requests": {"cpu": "1x"}}}]))
    assert "pod shop/web-0 spec.containers[0].resources.requests.cpu" in str(err.value)


def test_any_topology_key_is_accepted_and_a_missing_one_is_rejected():
    """kube-scheduler: a topologyKey is any node label key (issue 11: `rack` used to be refused)."""
    spread = [{"maxSkew": 1, "topologyKey": "rack", "labelSelector": {}}]
    assert (
        Pod.from_manifest(manifest(topologySpreadConstraints=spread)).topology_spread[0].topology_key
        == "rack"
    )
    with pytest.raises(PodError, match=r"topologySpreadConstraints\[0\]\.topologyKey"):
        Pod.from_manifest(manifest(topologySpreadConstraints=[{"maxSkew": 1}]))


def test_nil_label_selector_selects_nothing_and_defaults_of_spread():
    """kube-scheduler PodTopologySpread: nil labelSelector counts no pod; nodeAffinityPolicy Honor,
    nodeTaintsPolicy Ignore by default; minDomains only for DoNotSchedule."""
    spread = Pod.from_manifest(
        manifest(topologySpreadConstraints=[{"maxSkew": 2, "topologyKey": "rack", "minDomains": 3}])
    ).topology_spread[0]
    assert spread.selector is None and spread.min_domains == 3 and spread.hard
    assert (spread.node_affinity_policy, spread.node_taints_policy) == ("Honor", "Ignore")
    soft = Pod.from_manifest(
        manifest(
            topologySpreadConstraints=[
                {"maxSkew": 1, "topologyKey": "rack", "whenUnsatisfiable": "ScheduleAnyway", "minDomains": 2}
            ]
        )
    ).topology_spread[0]
    assert not soft.hard and soft.min_domains is None


def test_match_label_keys_are_anded_into_the_selector_with_the_pods_own_values():
    """kube-scheduler: matchLabelKeys take the incoming pod's value; keys the pod lacks are ignored."""
    obj = manifest(
        topologySpreadConstraints=[
            {"maxSkew": 1, "topologyKey": "rack", "labelSelector": {}, "matchLabelKeys": ["rev", "absent"]}
        ]
    )
    obj["metadata"]["labels"] = {"rev": "7"}
    selector = Pod.from_manifest(obj).topology_spread[0].selector
    assert selector.matches({"rev": "7"}) and not selector.matches({"rev": "8"})


def test_sidecars_add_to_apps_and_later_init_containers():
    """kube-scheduler resource.PodRequests: restartable init containers keep running."""
    pod = Pod.from_manifest(
        manifest(
            containers=[{"name": "a", "resources": {"requests": {"cpu": "1"}}}],
            initContainers=[
                {"name": "side", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
                {"name": "init", "resources": {"requests": {"cpu": "1500m"}}},
            ],
        )
    )
    assert pod.requests.cpu == 2.5  # the init step (1.5 + sidecar 1) beats apps + sidecar (2)


def test_host_ports_deprecated_labels_and_unmodelled_rules():
    obj = manifest(
        containers=[{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080}, {"containerPort": 81}]}],
        nodeSelector={"beta.kubernetes.io/arch": "arm64", "failure-domain.beta.kubernetes.io/zone": "z1"},
        volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "d"}}],
    )
    pod = Pod.from_manifest(obj)
    assert [(p.protocol, p.host_ip, p.port) for p in pod.host_ports] == [("TCP", "", 8080)]
    assert pod.node_selector == {"kubernetes.io/arch": "arm64", "topology.kubernetes.io/zone": "z1"}
    assert pod.unmodelled and "spec.volumes[0]" in pod.unmodelled[0]


def test_owner_and_tolerations():
    obj = manifest(tolerations=[{"operator": "Exists"}])
    obj["metadata"]["ownerReferences"] = [{"kind": "DaemonSet", "name": "ds", "controller": True}]
    pod = Pod.from_manifest(obj)
    assert pod.is_daemonset and pod.tolerations[0].operator == "Exists"


def _fields_term(operator: str, *extra: dict) -> dict:
    return {
        "matchFields": [{"key": "metadata.name", "operator": operator, "values": ["node-a"]}],
        "matchExpressions": list(extra),
    }


def _required(*terms: dict) -> dict:
    return {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}
    }


def test_match_fields_naming_nodes_can_match_no_new_node():
    """kube-scheduler matches matchFields against the node's name; karpy does not choose a new
    node's name, so a term requiring one (In) is one no new node can meet (issue 24)."""
    pod = Pod.from_manifest(manifest(affinity=_required(_fields_term("In"))))
    assert pod.unmodelled and "no term a new node can match" in pod.unmodelled[0]
    assert not pod.required_terms


def test_match_fields_a_new_node_meets_are_left_to_kube_scheduler():
    zone = {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["z1"]}
    pod = Pod.from_manifest(manifest(affinity=_required(_fields_term("NotIn", zone))))
    assert not pod.unmodelled
    assert pod.deferred == (
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        ".nodeSelectorTerms[0].matchFields: the node's name is not evaluated",
    )
    assert [r.key for (r,) in pod.required_terms] == ["topology.kubernetes.io/zone"]
    # ORed with a term naming nodes: that term is dropped, the other kept.
    pod = Pod.from_manifest(manifest(affinity=_required(_fields_term("In"), {"matchExpressions": [zone]})))
    assert not pod.unmodelled and not pod.deferred and len(pod.required_terms) == 1


def test_match_fields_on_other_fields_are_refused_with_the_path():
    term = {"matchFields": [{"key": "metadata.uid", "operator": "In", "values": ["x"]}]}
    with pytest.raises(PodError, match=r"nodeSelectorTerms\[0\]\.matchFields\[0\]\.key"):
        Pod.from_manifest(manifest(affinity=_required(term)))


def test_resource_claims_are_left_to_kube_scheduler():
    pod = Pod.from_manifest(manifest(resourceClaims=[{"name": "gpu", "resourceClaimName": "gpu"}]))
    assert not pod.unmodelled and pod.deferred and pod.deferred[0].startswith("spec.resourceClaims")


# --- one definition of DaemonSet and static pods (issue 23) ---------------------------------------
# Pod.is_daemonset read only the controller's kind (or the first owner's), the lifecycle's
# objects.is_daemonset_pod every owner reference: a DaemonSet owner that is not the controller (or
# not first) made consolidation move a pod that emptiness and the drain left with its node.
# Karpenter's IsOwnedByDaemonSet / IsOwnedByNode look at every owner reference.

RS = {"kind": "ReplicaSet", "name": "rs", "controller": True}
JOB = {"kind": "Job", "name": "job"}


@pytest.mark.parametrize(
    ("owners", "daemonset", "static"),
    [
        ([RS, {"kind": "DaemonSet", "name": "ds"}], True, False),
        ([JOB, {"kind": "DaemonSet", "name": "ds"}], True, False),
        ([JOB, {"kind": "Node", "name": "n1"}], False, True),
        ([RS], False, False),
    ],
)
def test_daemonset_and_static_pods_are_known_by_any_owner_reference(owners, daemonset, static):
    pod = Pod.from_manifest({**manifest(), "metadata": {"name": "p", "ownerReferences": owners}})
    assert pod.is_daemonset is daemonset and pod.is_static is static
    assert pod.node_bound is (daemonset or static)


def test_a_live_pod_with_an_unreadable_spec_keeps_what_the_lifecycle_reads():
    obj = {
        "metadata": {
            "name": "odd",
            "namespace": "shop",
            "uid": "u1",
            "ownerReferences": [{"kind": "DaemonSet", "name": "ds", "controller": True}],
            "annotations": {"karpenter.sh/do-not-evict": "true"},
            "deletionTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {
            "nodeName": "n1",
            "priorityClassName": "system-node-critical",
            "tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Sideways"}],
            "containers": [{"name": "c", "resources": {"requests": {"cpu": "lots"}}}],
        },
        "status": {"phase": "Running"},
    }
    with pytest.raises(PodError):
        Pod.from_manifest(obj)
    pod = Pod.from_live(obj)
    assert "spec.tolerations[0].operator" in pod.unreadable
    assert (pod.key, pod.uid, pod.node_name, pod.phase) == ("shop/odd", "u1", "n1", "Running")
    assert pod.is_daemonset and pod.deleting and pod.is_critical and pod.do_not_evict
    assert pod.tolerates_unschedulable and not pod.is_terminal
    assert Pod.from_live(manifest()).unreadable == ""


def test_the_guarded_flag_resource_is_not_a_request_a_node_must_offer():
    """`karpy.sh/guarded` only makes kube-scheduler send the pod to karpy's extender (the shipped
    config's managedResources, ignoredByScheduler: kube-scheduler's NodeResourcesFit ignores it)."""
    resources = {"requests": {"cpu": "1", "karpy.sh/guarded": "1"}, "limits": {"karpy.sh/guarded": "1"}}
    pod = Pod.from_manifest(manifest(containers=[{"name": "c", "resources": resources}]))
    assert pod.requests.names() == {"cpu"} and pod.requests.cpu == 1
