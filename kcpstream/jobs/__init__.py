"""Work outside Python: the command line, TOML job files, scheduled pipelines,
``kcpstream watch`` and the schedulers they start."""
