"""Planning: the flat list of steps, waves, decisions and the plan fingerprint."""
