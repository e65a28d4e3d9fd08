"""The built-in catalog: npa-infra's own tools.

Each entry is an exec vector over ``config.*`` and ``run.*`` tokens, run
inside the workbench image that ``images.TOOL_IMAGE_PREFIXES`` assigns to it.
Other catalogs (``--catalog FILE`` or ``NPA_TOOL_CATALOG``) extend this set.
"""

from __future__ import annotations

from npa_infra.catalog.model import Catalog, ToolEntry

__all__ = ["BUILTIN"]


def _tool(name: str, *argv: str, description: str = "", **extra: object) -> ToolEntry:
    return ToolEntry(name=name, argv_template=tuple(argv), description=description, **extra)  # type: ignore[arg-type]  # extra holds ToolEntry keywords


_S = ("python3", "-m", "npa_tools.sim2real")
_C = ("python3", "-m", "npa_tools.cosmos3")

_TOOLS = (
    _tool(
        "workbench.sim2real.check_trigger",
        *_S, "check-trigger", "--trigger-uri", "{{config.trigger_uri}}",
        "--out", "{{config.root_uri}}/trigger.json",
        description="Validate the seed trigger and its dataset manifest.",
    ),
    _tool(
        "workbench.cosmos2.transfer",
        *_S, "transfer", "--input-uri", "{{config.trigger_uri}}",
        "--out", "{{config.root_uri}}/augment/", "--control", "{{config.augment_control}}",
        "--seed", "{{config.seed}}",
        description="Input-conditioned Cosmos Transfer augmentation.",
        config_defaults={"augment_control": "edge", "seed": "17"},
    ),
    _tool(
        "workbench.isaac_lab.envgen",
        *_S, "envgen", "--root-uri", "{{config.root_uri}}", "--shard-index", "{{config.shard_index}}",
        "--shard-count", "{{config.shard_count}}", "--env-count", "{{config.env_count}}",
        description="Generate a shard of simulation environments.",
        config_defaults={"shard_index": "0", "env_count": "1000"},
    ),
    _tool(
        "workbench.sim2real.split",
        *_S, "split", "--root-uri", "{{config.root_uri}}", "--train-fraction", "{{config.train_fraction}}",
        description="Seal disjoint train, validation and gold splits.",
        config_defaults={"train_fraction": "0.8"},
    ),
    _tool(
        "workbench.isaac_lab.rollouts",
        *_S, "rollouts", "--root-uri", "{{config.root_uri}}", "--outer", "{{config.outer_iteration}}",
        "--inner", "{{config.inner_iteration}}", "--count", "{{config.rollout_count}}",
        description="Policy rollouts with multi-camera capture.",
        config_defaults={"rollout_count": "64"},
    ),
    _tool(
        "workbench.vlm_eval.score",
        *_S, "vlm-score", "--root-uri", "{{config.root_uri}}", "--lane", "{{config.lane}}",
        "--model", "{{config.vlm_model}}", "--outer", "{{config.outer_iteration}}",
        "--inner", "{{config.inner_iteration}}",
        description="Score rollouts with a vision-language model.",
        config_defaults={"vlm_model": "nvidia/Cosmos-Reason2-8B", "lane": "primary"},
    ),
    _tool(
        "workbench.isaac_lab.train_ppo",
        *_S, "train-ppo", "--root-uri", "{{config.root_uri}}", "--outer", "{{config.outer_iteration}}",
        "--inner", "{{config.inner_iteration}}", "--iterations", "{{config.ppo_iterations}}",
        description="PPO training on the train split.",
        config_defaults={"ppo_iterations": "500"},
    ),
    _tool(
        "workbench.isaac_lab.evaluate",
        *_S, "evaluate", "--root-uri", "{{config.root_uri}}", "--outer", "{{config.outer_iteration}}",
        "--split", "gold",
        description="Held-out evaluation on the untouched gold split.",
    ),
    _tool(
        "workbench.sim2real.decide",
        *_S, "decide", "--root-uri", "{{config.root_uri}}", "--threshold", "{{config.threshold}}",
        "--decision-uri", "{{config.decision_uri}}",
        description="Write the promote/loop-back decision artifact.",
        config_defaults={"threshold": "0.5"},
    ),
    _tool(
        "workbench.rerun.report",
        *_S, "report", "--root-uri", "{{config.root_uri}}",
        description="Final report with Rerun and MCAP recordings.",
    ),
    _tool(
        "workbench.cosmos3.prepare_input",
        *_C, "prepare-input", "--input-uri", "{{config.input_video_uri}}", "--out", "{{config.input_uri}}",
        description="Select one episode and camera; stage frames and provenance.",
    ),
    _tool(
        "workbench.cosmos3.caption",
        *_C, "caption", "--images-uri", "{{config.input_uri}}", "--out", "{{config.captions_uri}}",
        "--model", "{{config.caption_model}}",
        description="Caption source frames with a hosted VLM.",
        config_defaults={"caption_model": "Qwen/Qwen2.5-VL-72B-Instruct"},
    ),
    _tool(
        "workbench.cosmos3.generate_variants",
        *_C, "generate", "--input-uri", "{{config.input_uri}}", "--out", "{{config.augment_uri}}",
        "--variants", "{{config.variant_count}}", "--seed", "{{config.seed}}",
        "--checkpoint", "{{config.cosmos3_checkpoint}}",
        description="Source-conditioned Cosmos 3 video2video variants.",
        config_defaults={"variant_count": "2", "seed": "17", "cosmos3_checkpoint": "Cosmos3-Nano"},
    ),
    _tool(
        "workbench.cosmos3.evaluate",
        *_C, "evaluate", "--variants-uri", "{{config.augment_uri}}", "--out", "{{config.scores_uri}}",
        description="Grade every generated variant.",
    ),
    _tool(
        "workbench.cosmos3.gate",
        *_C, "gate", "--scores-uri", "{{config.scores_uri}}", "--threshold", "{{config.grade_threshold}}",
        "--decision-uri", "{{config.decision_uri}}",
        description="Promote or loop back on the variant grades.",
        config_defaults={"grade_threshold": "0.75"},
    ),
    _tool(
        "workbench.cosmos_curate.curate",
        *_C, "curate", "--input-uri", "{{config.augment_uri}}", "--out", "{{config.curated_uri}}",
        "--cache-dir", "{{config.curator_cache_dir}}",
        description="Clip, filter and deduplicate accepted variants.",
        omit_flags_when_empty=("--cache-dir",),
        config_defaults={"curator_cache_dir": ""},
    ),
    _tool(
        "workbench.rerun.visualize",
        *_C, "visualize", "--root-uri", "{{config.run_root_uri}}", "--out", "{{config.rrd_uri}}",
        description="Rerun recording of the run's evidence.",
    ),
)

BUILTIN = Catalog({tool.name: tool for tool in _TOOLS}, ("built-in",))
