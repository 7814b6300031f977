"""Execution: the reference evaluator, device selection, the batched VM and native code generation."""
