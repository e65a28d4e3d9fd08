"""``npa stack`` against the real Pulumi engine, a ``file://`` backend and a real context.

Collected only when the engine is present (see conftest.py). One stack, in
order: preview (changes), up, outputs, preview again (no changes), the plain
``pulumi preview`` of the same program, destroy; the controller's teardown
runs against the ``sky`` simulator, so no real SkyPilot is needed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from npa_infra.kube import kubeconfig
from npa_infra.skypilot.isolation import IsolatedDir
from npa_infra.stack import api
from npa_infra.stack.models import DestroyStatus, UpStatus
from npa_infra.workflow.target import stackfile
from tests.support import skyvenv

pytestmark = pytest.mark.e2e
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def world(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[api.StackRequest, dict[str, str]]]:
    assert shutil.which("pulumi"), "NPA_E2E=1 but no pulumi on PATH"
    context = os.environ.get("NPA_E2E_KUBE_CONTEXT")
    assert context, "NPA_E2E=1 but NPA_E2E_KUBE_CONTEXT is not set"
    _, kube_context = kubeconfig.resolve(context)
    namespace = kube_context.namespace
    root = tmp_path_factory.mktemp("e2e")
    project = root / "project"
    (project / "stacks").mkdir(parents=True)
    (project / "Pulumi.yaml").write_text(
        "name: npa-infra\nruntime:\n  name: python\n  options:\n"
        f"    virtualenv: {REPO / '.venv'}\nstackConfigDir: stacks\n",
        encoding="utf-8",
    )
    shutil.copy(REPO / "__main__.py", project / "__main__.py")
    stack = f"e2e-{uuid.uuid4().hex[:8]}"
    lines = [
        "config:",
        f"  npa-infra:context: {context}",
        f"  npa-infra:namespace: {namespace}",
        "  npa-infra:adoptNamespaces: true",
        "  npa-infra:protectNamespaces: false",
        f"  npa-infra:serviceAccount: npa-e2e-{stack[-8:]}",
    ]
    if os.environ.get("NPA_E2E_S3_BUCKET"):
        lines += [
            f"  npa-infra:bucket: {os.environ['NPA_E2E_S3_BUCKET']}",
            "  npa-infra:sourceDir: src",
        ]
        (project / "src").mkdir()
        (project / "src" / "hello.py").write_text("print('hi')\n", encoding="utf-8")
    (project / "stacks" / f"Pulumi.{stack}.yaml").write_text("\n".join(lines) + "\n")
    secret = root / "passphrase"
    secret.write_text(uuid.uuid4().hex, encoding="utf-8")
    secret.chmod(0o600)
    sky = skyvenv.simulator(root)
    env = {
        **os.environ,
        "NPA_HOME": str(root / "home"),
        "PULUMI_CONFIG_PASSPHRASE_FILE": str(secret),
        "PULUMI_HOME": os.environ.get("PULUMI_HOME", str(Path.home() / ".pulumi")),
        "NPA_SKYPILOT_BIN": str(sky),
        "SKYSIM_API_PORT": "47346",
    }
    request = api.StackRequest(stack=stack, project_root=project, on_output=print)
    with pytest.MonkeyPatch.context() as patch:
        # the engine's provider processes inherit this process's environment
        for key in ("NPA_HOME", "NPA_SKYPILOT_BIN", "SKYSIM_API_PORT", "PULUMI_HOME"):
            patch.setenv(key, env[key])
        yield request, env
        api.destroy(request, env=env, yes=True)  # a no-op after a passing run


def test_real_engine_lifecycle(world: tuple[api.StackRequest, dict[str, str]]) -> None:
    request, env = world

    first = api.preview(request, env=env)
    assert first.changes_present and first.change_summary.create >= 6

    up = api.up(request, env=env, yes=True)
    assert up.status is UpStatus.UPDATED and up.summary is not None
    assert up.summary.result == "succeeded"

    outputs = api.stack_outputs(request, env=env)
    assert outputs.context == os.environ["NPA_E2E_KUBE_CONTEXT"]
    assert outputs.controller_name.startswith("sky-jobs-controller-")
    assert Path(outputs.skypilot_config_path).is_file()
    bound = stackfile.resolve_stack(request.stack, request.project_root, env)
    assert bound.source == stackfile.FROM_OUTPUTS
    assert bound.controller_name == outputs.controller_name
    assert IsolatedDir(Path(outputs.isolated_config_dir)).owner() == request.stack

    again = api.preview(request, env=env)
    assert again.changes_present is False, again.steps

    plain = subprocess.run(
        ["pulumi", "preview", "--stack", request.stack, "--non-interactive", "--expect-no-changes"],
        cwd=request.project_root,
        env={**env, "PULUMI_BACKEND_URL": again.backend_url},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert plain.returncode == 0, plain.stdout + plain.stderr

    gone = api.destroy(request, env=env, yes=True)
    assert gone.status is DestroyStatus.DESTROYED
    assert IsolatedDir(Path(outputs.isolated_config_dir)).owner() is None
