"""The local proving ground: a real control plane (etcd, kube-apiserver, kube-controller-manager,
kube-scheduler, kwok) and moto as the AWS endpoint, all on 127.0.0.1.

Entry points: ``python -m hack.localcluster.cluster up|down|status`` (the Makefile's cluster-*
targets), ``python -m hack.localcluster.build`` (Go builds into ~/.cache/karpy), and
``hack.localcluster.awsseed`` (moto launcher + EKS-like seed, used by tests/conftest.py).
"""
