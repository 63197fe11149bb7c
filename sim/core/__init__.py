"""The simulator core: the one fluid engine and its compiled bandwidth allocator."""
