"""Running a segmentation: each series' plan and fitted map, then every phase
for all series at once (data pass, search, choice, checkpoint, result)."""
