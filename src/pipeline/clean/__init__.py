"""The clean stage's pure core: normalisation, PII redaction, per-document statistics and rules.

Nothing here reads or writes files; `pipeline.stages.clean` is the thin shell around it.
"""
