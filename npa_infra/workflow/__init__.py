"""Orchestration of spec commands: validate, plan, render, plan-only submit."""
