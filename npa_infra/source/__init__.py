"""Content-addressed source staging (runtime-reference.md §6, cli.md §1.10).

Image-less steps, and steps of specs with ``config.source_overlay: true``,
run the operator's local checkout. This package decides which files of that
checkout are source (``selection``, pure), hashes them into one fingerprint
(``fingerprint``, pure), lists and reads the checkout (``tree``), encodes the
marker that proves a complete upload (``marker``, pure), decides at submit
whether to keep, reuse or stage (``decision``, pure), and uploads the tree
under ``s3://<bucket>/<prefix>/<fingerprint>/`` (``staging``).
"""
