"""The MAX7800x command lines: the vendor's (`izer.py`, its option table `izer_args.py`) and
the native commands (`synth_cmd.py`, `simulate_cmd.py`, `plan_cmd.py`, `firmware.py` for
`build`), with how each spells the options that messages name (`option_names.py`). The
`device` command is the virtual device's own (`vdevice/cli.py`); `../cli.py` registers them."""
