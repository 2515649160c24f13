"""Tenants, their tokens and policies (docs/security.md): who may see and run which jobs, where
their jobs may send and what they may read."""
