"""Workload generators: from a scheme and a database size to einsum workloads."""
