"""`edgesynth report OUT/` (and `--report` on compile, synth, plan, validate): one
self-contained HTML page of a compiled network: its layers, memory pictures per target, time per
layer and, where validation ran, its metrics (`model` the data, `collect` reads the folders,
`render` writes the page from `templates/`)."""
