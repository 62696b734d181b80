"""Loading and validating specs: storeloop's own YAML formats and Timeloop v0.3 files (see load.py)."""
