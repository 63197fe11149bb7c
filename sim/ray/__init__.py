"""The Ray backend of simulator sweeps (optional: pip install -r requirements-ray.txt)."""
