"""The soft switch's executor of p4c's BMv2 JSON (v1model), compiled to closures at load."""
