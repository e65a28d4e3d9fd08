"""OCI registries: the operator-side manifest check of image preflight (registry.md).

Pure parts (no I/O): ``reference`` parses image references, ``challenge``
reads ``WWW-Authenticate`` and decides which token realms are trusted,
``classify`` turns registry answers into statuses and remedies, ``manifest``
verifies manifests and reads image configs, ``contract`` decides the
bootstrap-contract label rule, ``models`` holds the records. The adapter is
``client.RegistryClient`` (httpx, imported lazily) behind the
``base.Registry`` protocol; ``credentials`` scopes the environment's
registry credentials to exactly one host each.
"""
