"""The object-store adapter: the only code that talks to S3 (or an S3-compatible server).

Runtime mode reads decision artifacts and proves declared outputs through it
(dsl.md §5.4, runtime-reference.md §2). ``base.ObjectStore`` is the seam the
logic layers take; ``s3.BotoStore`` is the real adapter over boto3 (imported
lazily); ``errors.classify`` is the one translation of upstream failures.
Every method takes and returns our own ``models``, never boto3 objects.
"""
