"""The ``submit`` pipeline: options, plan, image gate, source, render, then the hand-over
of a ``LiveRequest`` to ``supervision.runner``. Plan-only submits stop before it."""
