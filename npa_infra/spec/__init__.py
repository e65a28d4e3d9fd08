"""Workflow specs: loading with positions, the model, validation and tokens."""
