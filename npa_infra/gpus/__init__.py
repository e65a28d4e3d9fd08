"""The GPU catalog of one Kubernetes context and accelerator resolution (kubernetes.md §8).

Pure: the callers read the nodes through a ``KubeCluster`` and pass them in.
``labels`` knows which node label SkyPilot 0.12 reads and how it names the
GPU; ``catalog`` builds the per-context catalog with eligibility and per-node
quantities; ``resolve`` decides, per ``NAME:N`` request, whether the cluster
can satisfy it and under which name.
"""
