"""The read-only spec commands (validate, plan, preflight-images, gpus) and what every
plan needs: the loaded spec, its options, fingerprint and run id, the GPU remap and
the image checks. Nothing here launches, journals or supervises."""
