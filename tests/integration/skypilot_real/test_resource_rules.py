"""The resource rules of ``npa_infra.spec.resources`` against the real skypilot==0.12.2 (issue 18).

Each profile value goes through npa's renderer, and the rendered field is
handed to the real ``sky.Resources`` in the bootstrapped venv. Whatever the
validator accepts, SkyPilot must accept; whatever SkyPilot rejects, the
validator must reject. Where the validator is stricter on purpose, the case is
listed in ``STRICTER``. Like the other real tests this bootstraps the venv when
it is missing and fails (never skips) when it cannot.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from npa_infra.render import tasks
from npa_infra.spec import resources

pytestmark = pytest.mark.slow

# (field, profile value, cloud is kubernetes)
CASES: list[tuple[str, Any, bool]] = [
    *[
        ("cpus", v, k)
        for v in (4, "4", "4+", 0.5, "0.5", "two", "two+", 0, -1, "4++", "nan", True)
        for k in (True, False)
    ],
    *[
        ("memory", v, k)
        for v in (
            16,
            "16",
            "16+",
            "16Gi",
            "16G",
            "16GB",
            "16gb",
            "lots",
            "lots+",
            "0",
            "16Gi+",
            "3x",
            "1.5TB",
        )
        for k in (True, False)
    ],
    *[
        ("accelerators", v, True)
        for v in ("H100:1", "H100", "H100:two", "H100:1:2", "H100x1", "8xH100", "L4:8", {"H100": 2})
    ],
]
# the validator rejects these on purpose though SkyPilot takes them (see resources.py)
STRICTER = {("cpus", "nan"), ("cpus", True), ("accelerators", "H100x1"), ("accelerators", "8xH100")}

_PROBE = """
import json, sys
import sky
out = []
for field, value in json.loads(sys.stdin.read()):
    try:
        sky.Resources(**{field: value})
        out.append(True)
    except Exception:  # any refusal counts: the real parser said no
        out.append(False)
print(json.dumps(out))
"""


def _rendered(field: str, value: Any, k8s: bool) -> Any:
    profile = {field: value, **({"cloud": "kubernetes"} if k8s else {})}
    settings = tasks.RenderSettings(workflow="w", run_id="r", config={})
    # the renderer's own resources block: what SkyPilot would really be given
    out = tasks._resources(None, profile, None, settings, {})  # type: ignore[arg-type]  # step is unused there
    return out.get(field)


def test_resource_rules_agree_with_real_skypilot(real_venv: Any) -> None:
    python = Path(real_venv.report.sky_bin).with_name("python")
    payload = [(f, _rendered(f, v, k)) for f, v, k in CASES]
    done = subprocess.run(
        [str(python), "-c", _PROBE],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    verdicts = json.loads(done.stdout.strip().splitlines()[-1])
    wrong = []
    for (field, value, k8s), sky_ok in zip(CASES, verdicts, strict=True):
        ours_ok = resources.problem(field, value, kubernetes=k8s) is None
        if ours_ok and not sky_ok:
            wrong.append(f"accepted but SkyPilot rejects: {field}={value!r} k8s={k8s}")
        if sky_ok and not ours_ok and (field, value) not in STRICTER:
            wrong.append(f"rejected but SkyPilot accepts: {field}={value!r} k8s={k8s}")
    assert not wrong, "\n".join(wrong)
