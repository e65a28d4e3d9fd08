"""``python -m npa_infra``: the ``npa`` console script, for environments without its wrapper."""

from npa_infra.cli import entry

entry.run()
