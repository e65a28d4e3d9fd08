"""``KubeApi`` without a server: construction, kubeconfig failures, V1Node mapping, lazy imports."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from kubernetes.client import V1Node

from npa_infra.errors import KubeError
from npa_infra.kube import failures
from npa_infra.kube.client import KubeApi, node_info
from npa_infra.kube.models import KubeErrorKind, Taint

REPO = Path(__file__).resolve().parents[3]


def kubeconfig_file(path: Path, *, contexts: list[dict[str, object]] | None = None) -> Path:
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": contexts
        if contexts is not None
        else [{"name": "a", "context": {"cluster": "c", "user": "u"}}],
    }
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def node(document: dict[str, object]) -> V1Node:
    return V1Node.from_dict({"apiVersion": "v1", "kind": "Node", **document})


# -- construction ----------------------------------------------------------------
def test_kubeapi_constructor_missing_file_no_io_no_error(tmp_path: Path) -> None:
    api = KubeApi(tmp_path / "absent", "a")

    assert api.context == "a"
    assert "absent" in repr(api)


def test_kubeapi_for_context_first_existing_file_chosen(tmp_path: Path) -> None:
    second = kubeconfig_file(tmp_path / "second")
    env = {"KUBECONFIG": f"{tmp_path / 'missing'}:{second}"}

    assert KubeApi.for_context("a", env).kubeconfig == second


def test_kubeapi_close_before_use_no_error(tmp_path: Path) -> None:
    with KubeApi(tmp_path / "absent", "a") as api:
        pass

    api.close()


# -- kubeconfig failures surface as terminal samples / errors ---------------------
def test_readyz_missing_kubeconfig_no_kubeconfig_sample(tmp_path: Path) -> None:
    sample = KubeApi(tmp_path / "absent", "a", clock=lambda: 42.0).readyz()

    assert (sample.ok, sample.kind, sample.at) == (False, KubeErrorKind.NO_KUBECONFIG, 42.0)


def test_readyz_unknown_context_sample_lists_contexts(tmp_path: Path) -> None:
    path = kubeconfig_file(tmp_path / "kc")

    sample = KubeApi(path, "nope").readyz()

    assert sample.kind is KubeErrorKind.UNKNOWN_CONTEXT
    assert "it defines: a" in sample.detail


def test_nodes_unknown_context_raises_unknown_context(tmp_path: Path) -> None:
    path = kubeconfig_file(tmp_path / "kc")

    with pytest.raises(KubeError) as caught:
        KubeApi(path, "nope").nodes()

    assert failures.kind_of(caught.value) is KubeErrorKind.UNKNOWN_CONTEXT
    assert "a" in caught.value.remedy


def test_readyz_context_naming_missing_cluster_no_kubeconfig_sample(tmp_path: Path) -> None:
    path = kubeconfig_file(
        tmp_path / "kc", contexts=[{"name": "a", "context": {"cluster": "ghost", "user": "u"}}]
    )

    sample = KubeApi(path, "a").readyz()

    assert sample.kind is KubeErrorKind.NO_KUBECONFIG
    assert "ghost" in sample.detail


def test_readyz_missing_ca_file_no_kubeconfig_sample(tmp_path: Path) -> None:
    path = tmp_path / "kc"
    path.write_text(
        yaml.safe_dump(
            {
                "clusters": [
                    {
                        "name": "c",
                        "cluster": {
                            "server": "https://127.0.0.1:9",
                            "certificate-authority": "missing-ca.pem",
                        },
                    }
                ],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "a", "context": {"cluster": "c", "user": "u"}}],
            }
        ),
        encoding="utf-8",
    )

    sample = KubeApi(path, "a").readyz()

    assert sample.kind is KubeErrorKind.NO_KUBECONFIG
    assert str(tmp_path / "missing-ca.pem") in sample.detail  # relative to the kubeconfig


# -- V1Node -> NodeInfo ------------------------------------------------------------
def test_node_info_gpu_node_labels_taints_ready_gpus_mapped() -> None:
    info = node_info(
        node(
            {
                "metadata": {"name": "gpu-1", "labels": {"nvidia.com/gpu.product": "H100"}},
                "spec": {
                    "taints": [
                        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                        {"key": "maint", "effect": "NoExecute"},
                    ]
                },
                "status": {
                    "conditions": [
                        {"type": "MemoryPressure", "status": "False"},
                        {"type": "Ready", "status": "True"},
                    ],
                    "allocatable": {"nvidia.com/gpu": "8", "cpu": "96"},
                },
            }
        )
    )

    assert info.name == "gpu-1"
    assert info.labels == {"nvidia.com/gpu.product": "H100"}
    assert info.taints == (
        Taint("nvidia.com/gpu", "present", "NoSchedule"),
        Taint("maint", "", "NoExecute"),
    )
    assert info.ready is True
    assert info.unschedulable is False
    assert info.allocatable_gpus == 8


@pytest.mark.parametrize(
    ("conditions", "ready"),
    [
        ([{"type": "Ready", "status": "False"}], False),
        ([{"type": "Ready", "status": "Unknown"}], False),
        ([], False),
        ([{"type": "Ready", "status": "True"}], True),
    ],
    ids=["false", "unknown", "none", "true"],
)
def test_node_info_ready_condition_status_mapped(
    conditions: list[dict[str, str]], ready: bool
) -> None:
    info = node_info(node({"metadata": {"name": "n"}, "status": {"conditions": conditions}}))

    assert info.ready is ready


def test_node_info_cordoned_unschedulable_true() -> None:
    info = node_info(node({"metadata": {"name": "n"}, "spec": {"unschedulable": True}}))

    assert info.unschedulable is True


def test_node_info_bare_node_empty_defaults() -> None:
    info = node_info(node({"metadata": {"name": "n"}}))

    assert (info.labels, info.taints, info.ready, info.unschedulable, info.allocatable_gpus) == (
        {},
        (),
        False,
        False,
        0,
    )


@pytest.mark.parametrize(
    ("quantity", "gpus"),
    [("0", 0), ("4", 4), ("2k", 2000), ("1500m", 1), ("junk", 0), ("-1", 0)],
    ids=["zero", "plain", "suffix", "milli", "junk", "negative"],
)
def test_node_info_allocatable_quantity_whole_gpus(quantity: str, gpus: int) -> None:
    info = node_info(
        node({"metadata": {"name": "n"}, "status": {"allocatable": {"nvidia.com/gpu": quantity}}})
    )

    assert info.allocatable_gpus == gpus


# -- lazy imports (style.md rule 6) --------------------------------------------------
def test_kube_modules_fresh_interpreter_import_no_kubernetes() -> None:
    script = textwrap.dedent(
        """\
        import json, sys
        import npa_infra.kube.client, npa_infra.kube.readiness, npa_infra.kube.kubeconfig
        import npa_infra.kube.failures
        print(json.dumps([m for m in ("kubernetes", "urllib3", "pydantic") if m in sys.modules]))
        """
    )
    completed = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )

    assert json.loads(completed.stdout) == []


# -- exec credential plugins (kube_config.py logs their failures instead of raising) --
def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def exec_kubeconfig(path: Path, code: str) -> Path:
    document = {
        "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{closed_port()}"}}],
        "users": [
            {
                "name": "u",
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "command": sys.executable,
                        "args": ["-c", code],
                        "interactiveMode": "Never",
                    }
                },
            }
        ],
        "contexts": [{"name": "a", "context": {"cluster": "c", "user": "u"}}],
    }
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def test_readyz_exec_plugin_exits_nonzero_exec_plugin_sample(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    path = exec_kubeconfig(
        tmp_path / "kc", "import sys; sys.stderr.write('token expired, log in again'); sys.exit(3)"
    )

    sample = KubeApi(path, "a").readyz()

    assert sample.kind is KubeErrorKind.EXEC_PLUGIN
    assert "process returned 3" in sample.detail
    assert "token expired" in sample.detail
    assert "token expired" not in capfd.readouterr().err  # nothing leaks onto the CLI's stderr


def test_nodes_exec_plugin_bad_output_raises_exec_plugin(tmp_path: Path) -> None:
    path = exec_kubeconfig(tmp_path / "kc", "print('not json')")

    with pytest.raises(KubeError) as caught:
        KubeApi(path, "a").nodes()

    assert failures.kind_of(caught.value) is KubeErrorKind.EXEC_PLUGIN
    assert "exec" in caught.value.remedy


def test_readyz_exec_plugin_token_then_refused_port_transport_sample(tmp_path: Path) -> None:
    credential = json.dumps(
        {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "kind": "ExecCredential",
            "status": {"token": "from-plugin"},
        }
    )
    path = exec_kubeconfig(tmp_path / "kc", f"print({credential!r})")

    sample = KubeApi(path, "a").readyz(timeout=2.0)

    assert sample.kind is KubeErrorKind.TRANSPORT  # refused: the plugin itself worked
    assert sample.status is None
