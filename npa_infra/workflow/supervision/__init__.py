"""A live run from its lock to its outcome: the runner opens the run, the wave loop
launches every rendered job in order and watches it, and the interventions carry
npa's own cancels and relaunches through, spending budgets only on proven causes."""
