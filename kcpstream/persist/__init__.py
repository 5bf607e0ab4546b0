"""What outlives a call: checkpoints of block statistics, their reuse for a
changed archive, and atomic file writes."""
