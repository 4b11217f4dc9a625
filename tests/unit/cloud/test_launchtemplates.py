"""User data and launch template identity (pure)."""

from __future__ import annotations

import base64

from extender.api.provisioner import Taint
from extender.cloud.aws.launchtemplates import LaunchTemplateSpec, user_data


def test_user_data_bootstraps_with_sorted_labels_and_taints() -> None:
    script = user_data(
        cluster="demo",
        endpoint="https://api.demo:6443",
        labels={"b": "2", "a": "1"},
        taints=[Taint("z", "NoSchedule", "1"), Taint("a", "NoExecute")],
    )
    lines = script.splitlines()
    assert lines[0] == "#!/bin/bash -xe"
    assert lines[2] == (
        "/etc/eks/bootstrap.sh demo --container-runtime containerd "
        "--apiserver-endpoint https://api.demo:6443 "
        "--kubelet-extra-args '--node-labels=a=1,b=2 --register-with-taints=a=:NoExecute,z=1:NoSchedule'"
    )


def test_user_data_quotes_hostile_values() -> None:
    script = user_data(cluster="demo; rm -rf /", endpoint="", labels={}, taints=[])
    assert "'demo; rm -rf /'" in script


def spec(**changes: object) -> LaunchTemplateSpec:
    fields: dict = {
        "image_id": "ami-1",
        "security_group_ids": ["sg-2", "sg-1"],
        "instance_profile": "nodes",
        "user_data": "#!/bin/bash\n",
        "tags": {"team": "x"},
    }
    fields.update(changes)
    return LaunchTemplateSpec.of(**fields)


def test_equal_inputs_name_the_same_template_whatever_their_order() -> None:
    assert spec().name("demo") == spec(security_group_ids=["sg-1", "sg-2"]).name("demo")
    assert spec().name("demo").startswith("karpy-demo-")


def test_each_input_changes_the_template_name() -> None:
    base = spec().name("demo")
    for changed in (
        spec(image_id="ami-2"),
        spec(security_group_ids=["sg-1"]),
        spec(instance_profile="other"),
        spec(user_data="#!/bin/sh\n"),
        spec(tags={"team": "y"}),
    ):
        assert changed.name("demo") != base
    assert spec().name("other") != base


def test_template_data_encodes_user_data_and_names_the_profile() -> None:
    data = spec().template_data()
    assert base64.b64decode(data["UserData"]).decode() == "#!/bin/bash\n"
    assert data["SecurityGroupIds"] == ["sg-1", "sg-2"]
    assert data["IamInstanceProfile"] == {"Name": "nodes"}
    assert data["MetadataOptions"]["HttpTokens"] == "required"
    assert "IamInstanceProfile" not in spec(instance_profile="").template_data()
