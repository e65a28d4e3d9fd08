"""Fakes of npa-infra's adapters, shipped like ``httpx.MockTransport`` (style.md rule 5)."""
